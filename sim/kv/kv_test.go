package kv

import (
	"fmt"
	"strings"
	"testing"
)

func words(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s%d ", prefix, i)
	}
	return b.String()
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		name   string
		prompt string
		want   int
	}{
		{"one token per word", "the quick brown fox", 4},
		{"runs of whitespace do not make tokens", "  a \t b\n\nc  ", 3},
		{"empty prompt has no tokens", "   ", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tokenize(tt.prompt)
			if len(got) != tt.want {
				t.Fatalf("Tokenize(%q) gave %d tokens, want %d", tt.prompt, len(got), tt.want)
			}
			for _, id := range got {
				if id < 0 || id >= Vocab {
					t.Errorf("token id %d outside [0, %d)", id, Vocab)
				}
			}
		})
	}
	if a, b := Tokenize("hello world"), Tokenize("hello world"); a[0] != b[0] || a[1] != b[1] {
		t.Errorf("tokenizer is not deterministic: %v vs %v", a, b)
	}
}

func TestBlockHashes(t *testing.T) {
	toks := Tokenize(words("w", 400))
	base := BlockHashes("42", "", toks, 128)
	tests := []struct {
		name     string
		got      []uint64
		wantLen  int
		sameAs   int // leading blocks equal to base
		differAt int // first block that must differ, -1 none
	}{
		{"only full blocks are hashed", base, 3, 3, -1},
		{"same tokens and seed give the same chain", BlockHashes("42", "", toks, 128), 3, 3, -1},
		{"a different hash seed shares no block", BlockHashes("7", "", toks, 128), 3, 0, 0},
		{"a cache salt shares no block", BlockHashes("42", "s", toks, 128), 3, 0, 0},
		{"a change in block 1 changes blocks 1 and 2 only",
			BlockHashes("42", "", append(append([]int32{}, toks[:200]...), append([]int32{7}, toks[201:]...)...), 128), 3, 1, 1},
		{"a shorter prompt shares its full blocks", BlockHashes("42", "", toks[:300], 128), 2, 2, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.got) != tt.wantLen {
				t.Fatalf("got %d hashes, want %d", len(tt.got), tt.wantLen)
			}
			for i := 0; i < tt.sameAs; i++ {
				if tt.got[i] != base[i] {
					t.Errorf("block %d differs from base", i)
				}
			}
			if tt.differAt >= 0 {
				for i := tt.differAt; i < len(tt.got); i++ {
					if tt.got[i] == base[i] {
						t.Errorf("block %d equals base, want different", i)
					}
				}
			}
		})
	}
}

func TestMaxHitBlocks(t *testing.T) {
	tests := []struct {
		name      string
		n, bs     int
		wantBlock int
	}{
		{"400 tokens in 128-blocks can hit 3 blocks (384 tokens)", 400, 128, 3},
		{"exactly 3 blocks can hit only 2: one token is computed", 384, 128, 2},
		{"shorter than a block hits nothing", 100, 128, 0},
		{"one token over a block hits one", 129, 128, 1},
		{"no tokens", 0, 128, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MaxHitBlocks(tt.n, tt.bs); got != tt.wantBlock {
				t.Errorf("MaxHitBlocks(%d, %d) = %d, want %d", tt.n, tt.bs, got, tt.wantBlock)
			}
		})
	}
}

func TestLRU(t *testing.T) {
	tests := []struct {
		name string
		run  func(l *LRU) error
	}{
		{"evicts the least recently used", func(l *LRU) error {
			l.Insert(1, 1)
			l.Insert(2, 2)
			l.Insert(3, 3)
			l.PrefixHits([]uint64{1}) // 1 is now most recent; 2 is oldest
			l.Insert(4, 4)
			if l.Contains(2) || !l.Contains(1) || !l.Contains(3) || !l.Contains(4) {
				return fmt.Errorf("after evicting, holds 1:%v 2:%v 3:%v 4:%v", l.Contains(1), l.Contains(2), l.Contains(3), l.Contains(4))
			}
			return nil
		}},
		{"pinned blocks are not evicted", func(l *LRU) error {
			l.Insert(1, 1)
			l.Insert(2, 2)
			l.Insert(3, 3)
			l.Pin(1)
			l.Insert(4, 4)
			if !l.Contains(1) || l.Contains(2) {
				return fmt.Errorf("pinned 1 held:%v, unpinned oldest 2 held:%v", l.Contains(1), l.Contains(2))
			}
			return nil
		}},
		{"all pinned: the store is skipped", func(l *LRU) error {
			for k := uint64(1); k <= 3; k++ {
				l.Insert(k, k)
				l.Pin(k)
			}
			if l.Insert(9, 9) || l.Contains(9) || len(l.entries) != 3 {
				return fmt.Errorf("insert into a fully pinned LRU was kept (len %d)", len(l.entries))
			}
			l.Unpin(2)
			if !l.Insert(9, 9) || l.Contains(2) {
				return fmt.Errorf("after unpinning 2, insert 9 failed or kept 2")
			}
			return nil
		}},
		{"prefix hits stop at the first miss", func(l *LRU) error {
			l.Insert(1, 1)
			l.Insert(3, 3)
			if got := l.PrefixHits([]uint64{1, 2, 3}); got != 1 {
				return fmt.Errorf("PrefixHits = %d, want 1", got)
			}
			return nil
		}},
		{"pin of a missing block fails", func(l *LRU) error {
			if l.Pin(5) || l.Pinned(5) {
				return fmt.Errorf("pinned a block that is not held")
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(NewLRU(3)); err != nil {
				t.Error(err)
			}
		})
	}
	if l := NewLRU(0); l.Insert(1, 1) || len(l.entries) != 0 {
		t.Errorf("a zero-capacity LRU held a block")
	}
}

// TestLRUFillsWithoutAllocating: the tier's slots and hash index are
// allocated when it is made, as vLLM's block pool is, so filling it to
// its capacity (the virtual engines' GPU tier: 7 372 blocks) allocates
// nothing, and neither does churning it once full.
func TestLRUFillsWithoutAllocating(t *testing.T) {
	const capacity = 7372
	l := NewLRU(capacity)
	k := uint64(0)
	fill := testing.AllocsPerRun(1, func() {
		for range capacity {
			k++
			l.Insert(k, k)
		}
	})
	churn := testing.AllocsPerRun(1, func() {
		for range capacity {
			k++
			l.Insert(k, k)
		}
	})
	if fill != 0 || churn != 0 || len(l.entries) != capacity {
		t.Errorf("filling %d blocks allocated %v times, churning %v times (holds %d): want none", capacity, fill, churn, len(l.entries))
	}
}

// BenchmarkLRUInsert: a new block into a full tier of 7 372 (each insert
// evicts the least recently used), the engine loop's store of a prompt's
// blocks.
func BenchmarkLRUInsert(b *testing.B) {
	const capacity = 7372
	l := NewLRU(capacity)
	k := uint64(0)
	for range capacity {
		k++
		l.Insert(k, k)
	}
	b.ReportAllocs()
	for b.Loop() {
		k++
		l.Insert(k, k)
	}
}
