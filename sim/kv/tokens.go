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
