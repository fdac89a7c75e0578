package sim

import (
	"encoding/json"
	"strings"
)

// The chat template is Meta-Llama-3-8B-Instruct's, fixed (the sim serves
// no tokenizer_config.json):
//
//	<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>
//
//	{{ m.content | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>
//
//	{% endif %}
//
// The rendered text is tokenized like a completion prompt (tokenize.go), so
// the same conversation always gives the same tokens and block hashes, and
// sending the rendered text to /v1/completions gives the same tokens too.
const (
	chatBegin       = "<|begin_of_text|>"
	chatHeaderStart = "<|start_header_id|>"
	chatHeaderEnd   = "<|end_header_id|>\n\n"
	chatEOT         = "<|eot_id|>"
)

// chatRoles are the roles the template renders.
var chatRoles = map[string]bool{"system": true, "user": true, "assistant": true}

type chatMessage struct {
	Role    string
	Content string
}

// renderChat applies the chat template.
func renderChat(msgs []chatMessage, addGenerationPrompt bool) string {
	var b strings.Builder
	b.WriteString(chatBegin)
	for _, m := range msgs {
		b.WriteString(chatHeaderStart)
		b.WriteString(m.Role)
		b.WriteString(chatHeaderEnd)
		b.WriteString(strings.TrimSpace(m.Content))
		b.WriteString(chatEOT)
	}
	if addGenerationPrompt {
		b.WriteString(chatHeaderStart + "assistant" + chatHeaderEnd)
	}
	return b.String()
}

// decodeChatRequest validates a /v1/chat/completions body. As in vLLM, an
// absent max_tokens (and max_completion_tokens) means the rest of the
// context, and unknown top-level keys are ignored.
func decodeChatRequest(body []byte, model string, maxModelLen int) (completionRequest, *apiError) {
	out := completionRequest{Chat: true}
	top, apiErr := decodeTop(body, model)
	if apiErr != nil {
		return out, apiErr
	}
	toks, apiErr := decodeChatPrompt(top)
	if apiErr != nil {
		return out, apiErr
	}
	out.Tokens = toks
	return out, decodeSampling(top, &out, 0, maxModelLen)
}

// decodeChatPrompt renders top's messages (and add_generation_prompt,
// default true) into prompt tokens.
func decodeChatPrompt(top map[string]json.RawMessage) ([]int32, *apiError) {
	msgs, apiErr := decodeMessages(top["messages"])
	if apiErr != nil {
		return nil, apiErr
	}
	addGen := true
	if raw, ok := top["add_generation_prompt"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &addGen); err != nil {
			return nil, badRequest("add_generation_prompt", "add_generation_prompt must be a boolean, got %s", clip(raw))
		}
	}
	return tokenize(renderChat(msgs, addGen)), nil
}

// decodeMessages reads the messages list: each an object with a known role
// and a content that is a string, null, or a list of text parts
// ({"type":"text","text":...}, joined with "\n" as vLLM does for a
// string-content template).
func decodeMessages(raw json.RawMessage) ([]chatMessage, *apiError) {
	if raw == nil || isNull(raw) {
		return nil, badRequest("messages", "messages is required")
	}
	var items []json.RawMessage
	if firstByte(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("messages", "messages must be a list of message objects, got %s", clip(raw))
	}
	if len(items) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	msgs := make([]chatMessage, len(items))
	for i, it := range items {
		var m map[string]json.RawMessage
		if firstByte(it) != '{' || json.Unmarshal(it, &m) != nil {
			return nil, badRequest("messages", "messages[%d] must be an object, got %s", i, clip(it))
		}
		rawRole, ok := m["role"]
		if !ok || isNull(rawRole) {
			return nil, badRequest("messages", "messages[%d].role is required", i)
		}
		var role string
		if json.Unmarshal(rawRole, &role) != nil {
			return nil, badRequest("messages", "messages[%d].role must be a string, got %s", i, clip(rawRole))
		}
		if !chatRoles[role] {
			return nil, badRequest("messages", "messages[%d].role %q is not supported: want system, user or assistant", i, role)
		}
		content, apiErr := decodeContent(m["content"], i)
		if apiErr != nil {
			return nil, apiErr
		}
		msgs[i] = chatMessage{Role: role, Content: content}
	}
	return msgs, nil
}

func decodeContent(raw json.RawMessage, i int) (string, *apiError) {
	if raw == nil || isNull(raw) {
		return "", nil // an assistant turn with tool calls has no content
	}
	switch firstByte(raw) {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", badRequest("messages", "messages[%d].content is not a valid string", i)
		}
		return s, nil
	case '[':
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil {
			return "", badRequest("messages", "messages[%d].content is not a valid list of parts", i)
		}
		texts := make([]string, 0, len(parts))
		for k, p := range parts {
			var part struct {
				Type *string `json:"type"`
				Text *string `json:"text"`
			}
			if firstByte(p) != '{' || json.Unmarshal(p, &part) != nil {
				return "", badRequest("messages", "messages[%d].content[%d] must be an object like {\"type\":\"text\",\"text\":...}, got %s", i, k, clip(p))
			}
			if part.Type == nil {
				return "", badRequest("messages", "messages[%d].content[%d].type is required", i, k)
			}
			if *part.Type != "text" {
				return "", badRequest("messages", "messages[%d].content[%d].type %q is not supported by the simulated engine: want text", i, k, *part.Type)
			}
			if part.Text == nil {
				return "", badRequest("messages", "messages[%d].content[%d].text must be a string", i, k)
			}
			texts = append(texts, *part.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", badRequest("messages", "messages[%d].content must be a string or a list of text parts, got %s", i, clip(raw))
}
