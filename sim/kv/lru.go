package kv

import "container/list"

// LRU is a KV tier: a set of blocks named by their hash, each held in a
// memory slot whose content is the block's digest (what the KV data would
// be), with a capacity, evicting the least recently used unpinned block.
// Pinned blocks (promised to a peer by a lookup, parked for a decoder, or a
// load's destination) are never evicted. A freed slot keeps its content
// until another block is written to it, and freed slots are reused last
// freed first, as an allocator reuses memory; so a reader that reads a slot
// after its block was freed reads whatever block was written there since.
// Not safe for concurrent use: the engine loop owns it.
type LRU struct {
	capacity int
	order    *list.List // front = most recently used
	entries  map[uint64]*list.Element
	content  []uint64 // by slot: the digest last written there
	free     []int    // freed slots, reused from the end
}

type lruEntry struct {
	key      uint64
	pins     int
	slot     int
	reserved bool // a load's destination: its slot is not written yet
}

// BlockRef names where a block was held: its hash and its slot.
type BlockRef struct {
	Key  uint64
	Slot int
}

// NewLRU returns an LRU holding at most capacity blocks (0 holds none).
func NewLRU(capacity int) *LRU {
	if capacity < 0 {
		capacity = 0
	}
	return &LRU{capacity: capacity, order: list.New(), entries: make(map[uint64]*list.Element)}
}

func (l *LRU) entry(k uint64) *lruEntry {
	if e, ok := l.entries[k]; ok {
		return e.Value.(*lruEntry)
	}
	return nil
}

// Contains reports whether k is held with its content, without touching it.
func (l *LRU) Contains(k uint64) bool {
	ent := l.entry(k)
	return ent != nil && !ent.reserved
}

// PrefixHits counts the leading keys held, in order, stopping at the first
// miss, and marks the hits as recently used.
func (l *LRU) PrefixHits(keys []uint64) int {
	for i, k := range keys {
		e, ok := l.entries[k]
		if !ok || e.Value.(*lruEntry).reserved {
			return i
		}
		l.order.MoveToFront(e)
	}
	return len(keys)
}

// Digest is the content of k's slot, if k is held with its content.
func (l *LRU) Digest(k uint64) (uint64, bool) {
	ent := l.entry(k)
	if ent == nil || ent.reserved {
		return 0, false
	}
	return l.content[ent.slot], true
}

// Insert adds k holding digest (or refreshes it: a block already held keeps
// the content first written, as a prefix cache does not store a block it
// has) and reports whether it is held afterwards: a full LRU whose blocks
// are all pinned skips the store, as vLLM's offloading does when no block
// can be evicted.
func (l *LRU) Insert(k, digest uint64) bool {
	if e, ok := l.entries[k]; ok {
		l.order.MoveToFront(e)
		return true
	}
	slot, ok := l.alloc()
	if !ok {
		return false
	}
	l.content[slot] = digest
	l.entries[k] = l.order.PushFront(&lruEntry{key: k, slot: slot})
	return true
}

// Reserve holds k as a load's destination: pinned, not a hit, its slot
// keeping whatever it held before until Fill writes it. It reports false
// when k is already held or no slot can be had.
func (l *LRU) Reserve(k uint64) bool {
	if _, ok := l.entries[k]; ok {
		return false
	}
	slot, ok := l.alloc()
	if !ok {
		return false
	}
	l.entries[k] = l.order.PushFront(&lruEntry{key: k, slot: slot, reserved: true, pins: 1})
	return true
}

// Fill writes a reserved block's content (its load landed) and releases
// the reservation's pin.
func (l *LRU) Fill(k, digest uint64) {
	if ent := l.entry(k); ent != nil && ent.reserved {
		l.content[ent.slot] = digest
		ent.reserved = false
		ent.pins--
	}
}

// Keep makes a reserved block a hit with whatever its slot holds, as if its
// load had landed (the recompute-keeps-partial defect).
func (l *LRU) Keep(k uint64) {
	if ent := l.entry(k); ent != nil && ent.reserved {
		ent.reserved = false
		ent.pins--
	}
}

// Cancel drops a reservation (its load failed) and frees its slot.
func (l *LRU) Cancel(k uint64) {
	if ent := l.entry(k); ent != nil && ent.reserved {
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
	e := l.entries[k]
	ent := e.Value.(*lruEntry)
	l.order.Remove(e)
	delete(l.entries, k)
	l.free = append(l.free, ent.slot)
}

// Ref is where k is held.
func (l *LRU) Ref(k uint64) (BlockRef, bool) {
	ent := l.entry(k)
	if ent == nil {
		return BlockRef{}, false
	}
	return BlockRef{Key: k, Slot: ent.slot}, true
}

// ReadSlot reads the slot of r: its content, and whether r's block is still
// what it holds (false once the block was freed, whatever the slot holds
// since).
func (l *LRU) ReadSlot(r BlockRef) (digest uint64, intact bool) {
	if r.Slot < 0 || r.Slot >= len(l.content) {
		return 0, false
	}
	ent := l.entry(r.Key)
	return l.content[r.Slot], ent != nil && ent.slot == r.Slot && !ent.reserved
}

// alloc finds a slot for a new block: a freed one, a never used one, or the
// least recently used unpinned block's, evicted.
func (l *LRU) alloc() (int, bool) {
	if l.capacity == 0 {
		return 0, false
	}
	if len(l.entries) >= l.capacity {
		for e := l.order.Back(); e != nil; e = e.Prev() {
			if ent := e.Value.(*lruEntry); ent.pins == 0 {
				l.order.Remove(e)
				delete(l.entries, ent.key)
				return ent.slot, true
			}
		}
		return 0, false
	}
	if n := len(l.free); n > 0 {
		s := l.free[n-1]
		l.free = l.free[:n-1]
		return s, true
	}
	l.content = append(l.content, 0)
	return len(l.content) - 1, true
}

// Pin protects k from eviction until a matching Unpin; it reports whether k
// is held.
func (l *LRU) Pin(k uint64) bool {
	ent := l.entry(k)
	if ent == nil {
		return false
	}
	ent.pins++
	return true
}

// Unpin releases one Pin of k.
func (l *LRU) Unpin(k uint64) {
	if ent := l.entry(k); ent != nil && ent.pins > 0 {
		ent.pins--
	}
}

// Pinned reports whether k is held and pinned.
func (l *LRU) Pinned(k uint64) bool {
	ent := l.entry(k)
	return ent != nil && ent.pins > 0
}
