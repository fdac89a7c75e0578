package kv

import "container/list"

// LRU is a set of block hashes with a capacity, evicting the least recently
// used unpinned block. Pinned blocks (promised to a peer by a lookup) are
// never evicted. Not safe for concurrent use: the engine loop owns it.
type LRU struct {
	capacity int
	order    *list.List // front = most recently used
	entries  map[uint64]*list.Element
}

type lruEntry struct {
	key  uint64
	pins int
}

// NewLRU returns an LRU holding at most capacity blocks (0 holds none).
func NewLRU(capacity int) *LRU {
	if capacity < 0 {
		capacity = 0
	}
	return &LRU{capacity: capacity, order: list.New(), entries: make(map[uint64]*list.Element)}
}

// Len is the number of blocks held.
func (l *LRU) Len() int { return len(l.entries) }

// Cap is the capacity in blocks.
func (l *LRU) Cap() int { return l.capacity }

// Contains reports whether k is held, without touching it.
func (l *LRU) Contains(k uint64) bool { _, ok := l.entries[k]; return ok }

// PrefixHits counts the leading keys held, in order, stopping at the first
// miss, and marks the hits as recently used.
func (l *LRU) PrefixHits(keys []uint64) int {
	for i, k := range keys {
		e, ok := l.entries[k]
		if !ok {
			return i
		}
		l.order.MoveToFront(e)
	}
	return len(keys)
}

// Insert adds k (or refreshes it) and reports whether it is held afterwards:
// a full LRU whose blocks are all pinned skips the store, as vLLM's
// offloading does when no block can be evicted.
func (l *LRU) Insert(k uint64) bool {
	if e, ok := l.entries[k]; ok {
		l.order.MoveToFront(e)
		return true
	}
	if l.capacity == 0 {
		return false
	}
	if len(l.entries) >= l.capacity && !l.evictOne() {
		return false
	}
	l.entries[k] = l.order.PushFront(&lruEntry{key: k})
	return true
}

func (l *LRU) evictOne() bool {
	for e := l.order.Back(); e != nil; e = e.Prev() {
		if ent := e.Value.(*lruEntry); ent.pins == 0 {
			l.order.Remove(e)
			delete(l.entries, ent.key)
			return true
		}
	}
	return false
}

// Pin protects k from eviction until a matching Unpin; it reports whether k
// is held.
func (l *LRU) Pin(k uint64) bool {
	e, ok := l.entries[k]
	if !ok {
		return false
	}
	e.Value.(*lruEntry).pins++
	return true
}

// Unpin releases one Pin of k.
func (l *LRU) Unpin(k uint64) {
	if e, ok := l.entries[k]; ok {
		if ent := e.Value.(*lruEntry); ent.pins > 0 {
			ent.pins--
		}
	}
}

// Pinned reports whether k is held and pinned.
func (l *LRU) Pinned(k uint64) bool {
	e, ok := l.entries[k]
	return ok && e.Value.(*lruEntry).pins > 0
}
