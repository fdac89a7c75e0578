package link

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"clean end between frames", nil, io.EOF},
		{"end inside the header", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"end inside the payload", []byte{0, 0, 0, 4, 1}, io.ErrUnexpectedEOF},
		{"a length over the max", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}
