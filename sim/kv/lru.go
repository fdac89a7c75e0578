package kv

// LRU is a KV tier: a set of blocks named by their hash, each held in a
// memory slot whose content is the block's digest (what the KV data would
// be), with a capacity, evicting the least recently used unpinned block.
// Pinned blocks (promised to a peer by a lookup, parked for a decoder, or a
// load's destination) are never evicted. A freed slot keeps its content
// until another block is written to it, and freed slots are reused last
// freed first, as an allocator reuses memory; so a reader that reads a slot
// after its block was freed reads whatever block was written there since.
// Not safe for concurrent use: the engine loop owns it.
//
// Its slots are allocated up front, as vLLM's are: the KV cache itself
// (gpu_memory_utilization's share of the GPU, the CPU tier's pinned
// buffer of cpu_bytes_to_use) and the block pool's KVCacheBlock objects,
// every one created and linked into the free queue when the pool is made
// (vllm/v1/core/block_pool.py BlockPool.__init__, FreeKVCacheBlockQueue).
// So a tier's memory does not grow as it fills: each slot is one element
// of an array, the recency order a list threaded through it by index, and
// the hash index is sized for the capacity. (The 72 GPU tiers of 7 372
// blocks of a 64-source, 8-decoder virtual run took 67 MB of heap once
// full, grown over the ~17 minutes a source takes to fill its own; made up
// front they take 38 MB from the start.)
type LRU struct {
	capacity int
	slots    []slot
	used     int              // slots handed out at least once
	entries  map[uint64]int32 // held block → its slot
	head     int32            // most recently used held slot; none: -1
	tail     int32            // least recently used
	free     []int32          // freed slots, reused from the end
}

// slot is one block's memory: the digest last written there and, while a
// block is held in it, the block's state and its place in the order.
type slot struct {
	digest     uint64
	key        uint64
	prev, next int32 // towards head, towards tail; -1 at the ends
	pins       int32
	reserved   bool // a load's destination: its slot is not written yet
}

// preallocMax bounds what NewLRU allocates up front (32 MiB of slots): a
// tier larger than that (a cpu_bytes_to_use of hundreds of GB at the sim's
// block size) grows its slots as it fills, as before.
const preallocMax = 1 << 20

// BlockRef names where a block was held: its hash and its slot.
type BlockRef struct {
	Key  uint64
	Slot int
}

// NewLRU returns an LRU holding at most capacity blocks (0 holds none).
func NewLRU(capacity int) *LRU {
	capacity = max(capacity, 0)
	n := min(capacity, preallocMax)
	return &LRU{capacity: capacity, slots: make([]slot, n), entries: make(map[uint64]int32, n), head: -1, tail: -1}
}

// held is k's slot, if k is held (reserved or not).
func (l *LRU) held(k uint64) (*slot, bool) {
	s, ok := l.entries[k]
	if !ok {
		return nil, false
	}
	return &l.slots[s], true
}

// Contains reports whether k is held with its content, without touching it.
func (l *LRU) Contains(k uint64) bool {
	s, ok := l.held(k)
	return ok && !s.reserved
}

// PrefixHits counts the leading keys held, in order, stopping at the first
// miss, and marks the hits as recently used.
func (l *LRU) PrefixHits(keys []uint64) int {
	for i, k := range keys {
		s, ok := l.entries[k]
		if !ok || l.slots[s].reserved {
			return i
		}
		l.toFront(s)
	}
	return len(keys)
}

// Digest is the content of k's slot, if k is held with its content.
func (l *LRU) Digest(k uint64) (uint64, bool) {
	s, ok := l.held(k)
	if !ok || s.reserved {
		return 0, false
	}
	return s.digest, true
}

// Insert adds k holding digest (or refreshes it: a block already held keeps
// the content first written, as a prefix cache does not store a block it
// has) and reports whether it is held afterwards: a full LRU whose blocks
// are all pinned skips the store, as vLLM's offloading does when no block
// can be evicted.
func (l *LRU) Insert(k, digest uint64) bool {
	if s, ok := l.entries[k]; ok {
		l.toFront(s)
		return true
	}
	s, ok := l.alloc()
	if !ok {
		return false
	}
	l.slots[s].digest = digest
	l.hold(k, s, false)
	return true
}

// Reserve holds k as a load's destination: pinned, not a hit, its slot
// keeping whatever it held before until Fill writes it. It reports false
// when k is already held or no slot can be had.
func (l *LRU) Reserve(k uint64) bool {
	if _, ok := l.entries[k]; ok {
		return false
	}
	s, ok := l.alloc()
	if !ok {
		return false
	}
	l.hold(k, s, true)
	return true
}

// hold makes slot s k's, most recently used; a reservation is pinned once.
func (l *LRU) hold(k uint64, s int32, reserved bool) {
	sl := &l.slots[s]
	sl.key, sl.reserved, sl.pins = k, reserved, 0
	if reserved {
		sl.pins = 1
	}
	l.entries[k] = s
	l.pushFront(s)
}

// Fill writes a reserved block's content (its load landed) and releases
// the reservation's pin.
func (l *LRU) Fill(k, digest uint64) {
	if s, ok := l.held(k); ok && s.reserved {
		s.digest = digest
		s.reserved = false
		s.pins--
	}
}

// Keep makes a reserved block a hit with whatever its slot holds, as if its
// load had landed (the recompute-keeps-partial defect).
func (l *LRU) Keep(k uint64) {
	if s, ok := l.held(k); ok && s.reserved {
		s.reserved = false
		s.pins--
	}
}

// Cancel drops a reservation (its load failed) and frees its slot.
func (l *LRU) Cancel(k uint64) {
	if s, ok := l.held(k); ok && s.reserved {
		l.remove(k)
	}
}

// Remove drops k and frees its slot, pinned or not.
func (l *LRU) Remove(k uint64) {
	if _, ok := l.entries[k]; ok {
		l.remove(k)
	}
}

func (l *LRU) remove(k uint64) {
	s := l.entries[k]
	l.unlink(s)
	delete(l.entries, k)
	l.free = append(l.free, s)
}

// Ref is where k is held.
func (l *LRU) Ref(k uint64) (BlockRef, bool) {
	s, ok := l.entries[k]
	if !ok {
		return BlockRef{}, false
	}
	return BlockRef{Key: k, Slot: int(s)}, true
}

// ReadSlot reads the slot of r: its content, and whether r's block is still
// what it holds (false once the block was freed, whatever the slot holds
// since).
func (l *LRU) ReadSlot(r BlockRef) (digest uint64, intact bool) {
	if r.Slot < 0 || r.Slot >= l.used {
		return 0, false
	}
	s, ok := l.entries[r.Key]
	return l.slots[r.Slot].digest, ok && int(s) == r.Slot && !l.slots[s].reserved
}

// alloc finds a slot for a new block: a freed one, a never used one, or the
// least recently used unpinned block's, evicted.
func (l *LRU) alloc() (int32, bool) {
	if l.capacity == 0 {
		return 0, false
	}
	if len(l.entries) >= l.capacity {
		for s := l.tail; s != -1; s = l.slots[s].prev {
			if l.slots[s].pins == 0 {
				l.unlink(s)
				delete(l.entries, l.slots[s].key)
				return s, true
			}
		}
		return 0, false
	}
	if n := len(l.free); n > 0 {
		s := l.free[n-1]
		l.free = l.free[:n-1]
		return s, true
	}
	if l.used == len(l.slots) {
		l.slots = append(l.slots, slot{}) // beyond preallocMax
	}
	l.used++
	return int32(l.used - 1), true
}

// pushFront links s at the head of the order.
func (l *LRU) pushFront(s int32) {
	sl := &l.slots[s]
	sl.prev, sl.next = -1, l.head
	if l.head != -1 {
		l.slots[l.head].prev = s
	} else {
		l.tail = s
	}
	l.head = s
}

// unlink takes s out of the order.
func (l *LRU) unlink(s int32) {
	sl := &l.slots[s]
	if sl.prev != -1 {
		l.slots[sl.prev].next = sl.next
	} else {
		l.head = sl.next
	}
	if sl.next != -1 {
		l.slots[sl.next].prev = sl.prev
	} else {
		l.tail = sl.prev
	}
	sl.prev, sl.next = -1, -1
}

func (l *LRU) toFront(s int32) {
	if l.head != s {
		l.unlink(s)
		l.pushFront(s)
	}
}

// Pin protects k from eviction until a matching Unpin; it reports whether k
// is held.
func (l *LRU) Pin(k uint64) bool {
	s, ok := l.held(k)
	if !ok {
		return false
	}
	s.pins++
	return true
}

// Unpin releases one Pin of k.
func (l *LRU) Unpin(k uint64) {
	if s, ok := l.held(k); ok && s.pins > 0 {
		s.pins--
	}
}

// Pinned reports whether k is held and pinned.
func (l *LRU) Pinned(k uint64) bool {
	s, ok := l.held(k)
	return ok && s.pins > 0
}
