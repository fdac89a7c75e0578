package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"p2pfault/sim/kv"
)

// Llama 3's special tokens, with its ids: the chat template (chat.go) is
// written with them, and a prompt that spells one is given its id, as
// Llama 3's tokenizer does, so a rendered conversation sent as a plain
// completion prompt gives the same tokens as the chat request.
var specialTokens = []struct {
	text string
	id   int32
}{
	{"<|begin_of_text|>", 128000},
	{"<|end_of_text|>", 128001},
	{"<|start_header_id|>", 128006},
	{"<|end_header_id|>", 128007},
	{"<|eom_id|>", 128008},
	{"<|eot_id|>", 128009},
}

// tokPrefix and tokSuffix spell a token id the detokenizer cannot name:
// "<|tok_N|>" tokenizes back to N, so detokenize then tokenize gives the
// same ids.
const (
	tokPrefix = "<|tok_"
	tokSuffix = "|>"
)

// tokenize is the front end's tokenizer: Llama 3's special tokens by name,
// "<|tok_N|>" as id N, and every other whitespace-separated word as
// kv.Tokenize maps it. It adds no BOS token (a completion prompt is counted
// as sent; the chat template writes its own <|begin_of_text|>).
func tokenize(s string) []int32 {
	if !strings.Contains(s, "<|") {
		return kv.Tokenize(s) // the common case: no special token to split out
	}
	var out []int32
	start := 0 // of the text not yet tokenized
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], "<|")
		if k < 0 {
			break
		}
		i += k
		id, n := specialAt(s[i:])
		if n == 0 {
			i += 2 // not a special token: "<|" stays part of its word
			continue
		}
		out = append(out, kv.Tokenize(s[start:i])...)
		out = append(out, id)
		i += n
		start = i
	}
	return append(out, kv.Tokenize(s[start:])...)
}

// specialAt reports the special token s starts with and its length, or n 0.
func specialAt(s string) (id int32, n int) {
	for _, t := range specialTokens {
		if strings.HasPrefix(s, t.text) {
			return t.id, len(t.text)
		}
	}
	if strings.HasPrefix(s, tokPrefix) {
		rest := s[len(tokPrefix):]
		end := strings.Index(rest, tokSuffix)
		if end > 0 && end <= 7 {
			if v, err := strconv.Atoi(rest[:end]); err == nil && v >= 0 && v < kv.Vocab && strconv.Itoa(v) == rest[:end] {
				return int32(v), len(tokPrefix) + end + len(tokSuffix)
			}
		}
	}
	return 0, 0
}

// vocabMemory remembers the words the tokenizer met through /tokenize and
// the words completions are made of, so /detokenize can spell them; an id
// it never met is spelt "<|tok_N|>". Bounded: past maxWords it learns no more.
type vocabMemory struct {
	mu    sync.Mutex
	words map[int32]string
}

const maxWords = 1 << 16

func newVocabMemory() *vocabMemory {
	v := &vocabMemory{words: make(map[int32]string)}
	v.learn(generationWords)
	return v
}

func (v *vocabMemory) learn(s string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, w := range strings.Fields(specialSpacer.Replace(s)) {
		if len(v.words) >= maxWords {
			return
		}
		if strings.Contains(w, "<|") {
			continue // may hold special tokens: not one word
		}
		id := kv.Tokenize(w)[0]
		if _, ok := v.words[id]; !ok {
			v.words[id] = w
		}
	}
}

// detokenize spells ids so that tokenize gives them back.
func (v *vocabMemory) detokenize(ids []int32) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b strings.Builder
	prevWord := false
	for _, id := range ids {
		if name := specialName(id); name != "" {
			b.WriteString(name)
			prevWord = false
			continue
		}
		if prevWord {
			b.WriteByte(' ')
		}
		if w, ok := v.words[id]; ok {
			b.WriteString(w)
			prevWord = true
			continue
		}
		b.WriteString(tokPrefix + strconv.Itoa(int(id)) + tokSuffix)
		prevWord = false
	}
	return b.String()
}

// specialSpacer turns special tokens into spaces, leaving the words.
var specialSpacer = func() *strings.Replacer {
	var pairs []string
	for _, t := range specialTokens {
		pairs = append(pairs, t.text, " ")
	}
	return strings.NewReplacer(pairs...)
}()

func specialName(id int32) string {
	for _, t := range specialTokens {
		if t.id == id {
			return t.text
		}
	}
	return ""
}

// postTop is the prologue of the tokenizer's handlers: a POST whose body
// is a JSON object for the served model; false when it has answered
// already (405, or the body's 400).
func (f *frontEnd) postTop(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	body, ok := postBody(w, r)
	if !ok {
		return nil, false
	}
	top, apiErr := decodeTop(body, f.cfg.Model)
	if apiErr != nil {
		writeAPIError(w, apiErr)
		return nil, false
	}
	return top, true
}

// handleTokenize is vLLM's POST /tokenize: {"prompt": "..."} or
// {"messages": [...]} (rendered by the chat template), answering
// {"count", "max_model_len", "tokens", "token_strs"}. count is what
// usage.prompt_tokens of the same completion or chat request says.
func (f *frontEnd) handleTokenize(w http.ResponseWriter, r *http.Request) {
	top, ok := f.postTop(w, r)
	if !ok {
		return
	}
	var toks []int32
	_, hasMsgs := top["messages"]
	rawPrompt, hasPrompt := top["prompt"]
	switch {
	case hasMsgs && hasPrompt:
		writeAPIError(w, badRequest("", "give either prompt or messages, not both"))
		return
	case hasMsgs:
		t, apiErr := decodeChatPrompt(top)
		if apiErr != nil {
			writeAPIError(w, apiErr)
			return
		}
		toks = t
	case hasPrompt:
		if firstByte(rawPrompt) == '"' {
			var s string
			if err := json.Unmarshal(rawPrompt, &s); err == nil {
				f.vocab.learn(s)
			}
		}
		t, apiErr := decodePrompt(rawPrompt)
		if apiErr != nil {
			writeAPIError(w, apiErr)
			return
		}
		toks = t
	default:
		writeAPIError(w, badRequest("prompt", "prompt (a string) or messages is required"))
		return
	}
	if raw, ok := top["add_special_tokens"]; ok && !isNull(raw) {
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			writeAPIError(w, badRequest("add_special_tokens", "add_special_tokens must be a boolean, got %s", clip(raw)))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"count": len(toks), "max_model_len": f.cfg.MaxModelLen, "tokens": toks, "token_strs": nil,
	})
}

// handleDetokenize is vLLM's POST /detokenize: {"tokens": [ids]} →
// {"prompt": text}.
func (f *frontEnd) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	top, ok := f.postTop(w, r)
	if !ok {
		return
	}
	raw, ok := top["tokens"]
	if !ok || isNull(raw) || firstByte(raw) != '[' {
		writeAPIError(w, badRequest("tokens", "tokens (an array of token ids) is required"))
		return
	}
	ids, apiErr := decodeTokenIDs(raw, "tokens")
	if apiErr != nil {
		writeAPIError(w, apiErr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": f.vocab.detokenize(ids)})
}
