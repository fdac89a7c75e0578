// Package kv is the simulated engine's KV-cache model: a deterministic
// tokenizer, the block-hash chain that names KV blocks across engines, and
// the LRU tiers (GPU prefix cache, CPU offload tier) that hold them.
package kv

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
)

// Vocab is the tokenizer's vocabulary size (Llama 3's is 128256; a power of
// two keeps the mapping simple). Token ids sent as arrays must be below it.
const Vocab = 131072

// Tokenize maps a prompt to one token per whitespace-separated word, the id
// being the word's FNV-1a hash modulo Vocab: deterministic across engines,
// which is all block hashing needs.
func Tokenize(prompt string) []int32 {
	words := strings.Fields(prompt)
	out := make([]int32, len(words))
	for i, w := range words {
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		out[i] = int32(h.Sum64() % Vocab)
	}
	return out
}

// BlockHashes returns the hash chain of the full blocks of tokens: block i's
// hash covers its parent's hash and its own tokens, so equal hashes mean an
// equal prefix. The chain is seeded by the hash seed (PYTHONHASHSEED in
// vLLM) and the request's cache salt, so engines with different seeds never
// share blocks.
func BlockHashes(seed, salt string, tokens []int32, blockSize int) []uint64 {
	if blockSize <= 0 {
		return nil
	}
	n := len(tokens) / blockSize
	out := make([]uint64, n)
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "seed=%s\x00salt=%s", seed, salt)
	parent := h.Sum64()
	var buf [8]byte
	for b := 0; b < n; b++ {
		h.Reset()
		binary.LittleEndian.PutUint64(buf[:], parent)
		_, _ = h.Write(buf[:])
		for _, t := range tokens[b*blockSize : (b+1)*blockSize] {
			binary.LittleEndian.PutUint32(buf[:4], uint32(t))
			_, _ = h.Write(buf[:4])
		}
		parent = h.Sum64()
		out[b] = parent
	}
	return out
}

// Fingerprint is the engine configuration two peers must share to exchange
// blocks: the same model, block size, tensor-parallel size and KV layout.
func Fingerprint(model string, blockSize, tpSize, kvBytesPerToken int) string {
	return fmt.Sprintf("model=%s block_size=%d tp=%d kv_bytes_per_token=%d", model, blockSize, tpSize, kvBytesPerToken)
}

// MaxHitBlocks is how many leading blocks of an n-token prompt may come from
// a cache: at least one token is always computed, so a prompt of exactly k
// blocks can hit at most k-1.
func MaxHitBlocks(n, blockSize int) int {
	if n <= 0 || blockSize <= 0 {
		return 0
	}
	return (n - 1) / blockSize
}

// BlockDigests returns the content digest of each full block of tokens:
// what its KV data would be, a function of the block's tokens, its position
// and every block before it (attention reads the whole prefix). Unlike the
// block hashes it does not depend on the hash seed or the cache salt: equal
// tokens give equal KV whichever engine computes them, so a block loaded
// from a peer and the same block computed here hold the same digest, and a
// block that is not the prompt's holds another.
func BlockDigests(tokens []int32, blockSize int) []uint64 {
	if blockSize <= 0 {
		return nil
	}
	n := len(tokens) / blockSize
	out := make([]uint64, n)
	var prev uint64
	for b := 0; b < n; b++ {
		h := uint64(fnvOffset)
		h = mix64(h, prev)
		h = mix64(h, uint64(b))
		for _, t := range tokens[b*blockSize : (b+1)*blockSize] {
			h = mix32(h, uint32(t))
		}
		prev = h
		out[b] = h
	}
	return out
}

// FNV-1a over little-endian words, inlined: BlockDigests runs on every
// request and must not allocate a hasher per block.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func mix64(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

func mix32(h uint64, v uint32) uint64 {
	for i := 0; i < 4; i++ {
		h ^= uint64(v & 0xff)
		h *= fnvPrime
		v >>= 8
	}
	return h
}

// DecodeDigest is what a decode step reads: the digests of the blocks the
// request holds, in order, and the tokens after them (computed with the
// step itself). Generated tokens are a function of it alone.
func DecodeDigest(held []uint64, tail []int32) uint64 {
	h := uint64(fnvOffset)
	for _, d := range held {
		h = mix64(h, d)
	}
	h = mix64(h, uint64(len(held)))
	for _, t := range tail {
		h = mix32(h, uint32(t))
	}
	return h
}
