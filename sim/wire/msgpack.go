package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// encoder appends msgpack in its smallest forms, as msgspec writes it.
type encoder struct{ b []byte }

func (e *encoder) mapLen(n int) {
	switch {
	case n < 16:
		e.b = append(e.b, 0x80|byte(n))
	case n <= math.MaxUint16:
		e.b = append(e.b, 0xde, byte(n>>8), byte(n))
	default:
		e.b = append(e.b, 0xdf)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(n))
	}
}

func (e *encoder) arrayLen(n int) {
	switch {
	case n < 16:
		e.b = append(e.b, 0x90|byte(n))
	case n <= math.MaxUint16:
		e.b = append(e.b, 0xdc, byte(n>>8), byte(n))
	default:
		e.b = append(e.b, 0xdd)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(n))
	}
}

func (e *encoder) str(s string) {
	n := len(s)
	switch {
	case n < 32:
		e.b = append(e.b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		e.b = append(e.b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		e.b = append(e.b, 0xda, byte(n>>8), byte(n))
	default:
		e.b = append(e.b, 0xdb)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(n))
	}
	e.b = append(e.b, s...)
}

func (e *encoder) bin(p []byte) {
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		e.b = append(e.b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		e.b = append(e.b, 0xc5, byte(n>>8), byte(n))
	default:
		e.b = append(e.b, 0xc6)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(n))
	}
	e.b = append(e.b, p...)
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 0xc3)
	} else {
		e.b = append(e.b, 0xc2)
	}
}

func (e *encoder) int(v int64) {
	if v >= 0 {
		e.uint(uint64(v))
		return
	}
	switch {
	case v >= -32:
		e.b = append(e.b, byte(v))
	case v >= math.MinInt8:
		e.b = append(e.b, 0xd0, byte(v))
	case v >= math.MinInt16:
		e.b = append(e.b, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		e.b = append(e.b, 0xd2)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(v))
	default:
		e.b = append(e.b, 0xd3)
		e.b = binary.BigEndian.AppendUint64(e.b, uint64(v))
	}
}

func (e *encoder) uint(v uint64) {
	switch {
	case v < 128:
		e.b = append(e.b, byte(v))
	case v <= math.MaxUint8:
		e.b = append(e.b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		e.b = append(e.b, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		e.b = append(e.b, 0xce)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(v))
	default:
		e.b = append(e.b, 0xcf)
		e.b = binary.BigEndian.AppendUint64(e.b, v)
	}
}

// reader reads msgpack from a payload held whole. It never recurses and
// allocates only what the payload's own bytes justify, so a hostile
// payload costs at most its length.
type reader struct {
	b []byte
	i int
}

func (r *reader) left() int { return len(r.b) - r.i }

func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || n > r.left() {
		return nil, fmt.Errorf("want %d bytes, have %d: %w", n, r.left(), io.ErrUnexpectedEOF)
	}
	p := r.b[r.i : r.i+n]
	r.i += n
	return p, nil
}

func (r *reader) byte() (byte, error) {
	p, err := r.take(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// uintN reads an n-byte big-endian length or number.
func (r *reader) uintN(n int) (uint64, error) {
	p, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// container reads a map or array header: fix, 16- or 32-bit. A count the
// remaining bytes cannot hold (each entry takes a byte or more) is a lie.
func (r *reader) container(fix, fixMask, c16, c32 byte, what string) (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, fmt.Errorf("want %s: %w", what, err)
	}
	var n uint64
	switch {
	case c&fixMask == fix:
		n = uint64(c &^ fixMask)
	case c == c16:
		n, err = r.uintN(2)
	case c == c32:
		n, err = r.uintN(4)
	default:
		return 0, fmt.Errorf("want %s, got msgpack code 0x%02x", what, c)
	}
	if err != nil {
		return 0, fmt.Errorf("want %s: %w", what, err)
	}
	if n > uint64(r.left()) {
		return 0, fmt.Errorf("%s of %d entries in %d bytes", what, n, r.left())
	}
	return int(n), nil
}

func (r *reader) mapLen() (int, error)   { return r.container(0x80, 0xf0, 0xde, 0xdf, "map") }
func (r *reader) arrayLen() (int, error) { return r.container(0x90, 0xf0, 0xdc, 0xdd, "array") }

// raw reads a str (bin too when binOK) and returns its bytes, not copied.
func (r *reader) raw(binOK bool, what string) ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, fmt.Errorf("want %s: %w", what, err)
	}
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || (binOK && c == 0xc4):
		n, err = r.uintN(1)
	case c == 0xda || (binOK && c == 0xc5):
		n, err = r.uintN(2)
	case c == 0xdb || (binOK && c == 0xc6):
		n, err = r.uintN(4)
	default:
		return nil, fmt.Errorf("want %s, got msgpack code 0x%02x", what, c)
	}
	if err != nil {
		return nil, fmt.Errorf("want %s: %w", what, err)
	}
	if n > uint64(r.left()) {
		return nil, fmt.Errorf("want %s of %d bytes, have %d: %w", what, n, r.left(), io.ErrUnexpectedEOF)
	}
	return r.take(int(n))
}

func (r *reader) str() (string, error) {
	p, err := r.raw(false, "string")
	return string(p), err
}

// bytes reads a bin, or a str as a peer of another make may send bytes.
func (r *reader) bytes() ([]byte, error) {
	p, err := r.raw(true, "bytes")
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), p...), nil
}

func (r *reader) bool() (bool, error) {
	c, err := r.byte()
	if err != nil {
		return false, fmt.Errorf("want bool: %w", err)
	}
	switch c {
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	}
	return false, fmt.Errorf("want bool, got msgpack code 0x%02x", c)
}

// number reads any msgpack integer as a uint64 and whether it is negative.
func (r *reader) number() (u uint64, neg bool, err error) {
	c, err := r.byte()
	if err != nil {
		return 0, false, fmt.Errorf("want integer: %w", err)
	}
	switch {
	case c < 0x80:
		return uint64(c), false, nil
	case c >= 0xe0:
		return uint64(int64(int8(c))), true, nil
	case c >= 0xcc && c <= 0xcf:
		u, err = r.uintN(1 << (c - 0xcc))
		return u, false, err
	case c >= 0xd0 && c <= 0xd3:
		n := 1 << (c - 0xd0)
		u, err = r.uintN(n)
		if err != nil {
			return 0, false, err
		}
		// Sign-extend the n-byte two's complement value.
		shift := 64 - 8*n
		v := int64(u<<shift) >> shift
		return uint64(v), v < 0, nil
	}
	return 0, false, fmt.Errorf("want integer, got msgpack code 0x%02x", c)
}

func (r *reader) int() (int64, error) {
	u, neg, err := r.number()
	if err != nil {
		return 0, err
	}
	if !neg && u > math.MaxInt64 {
		return 0, fmt.Errorf("integer %d out of range", u)
	}
	return int64(u), nil
}

// nonNeg reads an integer that must be 0 or more.
func (r *reader) nonNeg() (int64, error) {
	v, err := r.int()
	if err == nil && v < 0 {
		err = fmt.Errorf("%d is negative", v)
	}
	return v, err
}

func (r *reader) uint() (uint64, error) {
	u, neg, err := r.number()
	if err == nil && neg {
		err = fmt.Errorf("%d is negative", int64(u))
	}
	return u, err
}

// skip passes over one value of any kind, nested or not, with a count of
// the values still to pass instead of recursion.
func (r *reader) skip() error {
	for todo := 1; todo > 0; todo-- {
		c, err := r.byte()
		if err != nil {
			return err
		}
		n, extra, err := r.skipLen(c)
		if err != nil {
			return err
		}
		if _, err := r.take(n); err != nil {
			return err
		}
		// Every value still to pass takes a byte or more.
		if todo-1+extra > r.left() {
			return fmt.Errorf("container of %d values in %d bytes", extra, r.left())
		}
		todo += extra
	}
	return nil
}

// skipLen is how many bytes follow a value's code and how many values it
// contains (a map's keys and values, an array's elements).
func (r *reader) skipLen(c byte) (n, values int, err error) {
	size := func(k int) (int, error) {
		v, err := r.uintN(k)
		return int(v), err
	}
	switch {
	case c < 0x80 || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return 0, 0, nil
	case c&0xf0 == 0x80:
		return 0, 2 * int(c&0x0f), nil
	case c&0xf0 == 0x90:
		return 0, int(c & 0x0f), nil
	case c&0xe0 == 0xa0:
		return int(c & 0x1f), 0, nil
	case c == 0xc4 || c == 0xd9:
		n, err = size(1)
	case c == 0xc5 || c == 0xda:
		n, err = size(2)
	case c == 0xc6 || c == 0xdb:
		n, err = size(4)
	case c == 0xc7, c == 0xc8, c == 0xc9: // ext 8/16/32: size, then a type byte
		n, err = size(1 << (c - 0xc7))
		n++
	case c == 0xca:
		return 4, 0, nil
	case c == 0xcb:
		return 8, 0, nil
	case c >= 0xcc && c <= 0xcf:
		return 1 << (c - 0xcc), 0, nil
	case c >= 0xd0 && c <= 0xd3:
		return 1 << (c - 0xd0), 0, nil
	case c >= 0xd4 && c <= 0xd8: // fixext 1..16, plus its type byte
		return 1<<(c-0xd4) + 1, 0, nil
	case c == 0xdc:
		values, err = size(2)
	case c == 0xdd:
		values, err = size(4)
	case c == 0xde:
		values, err = size(2)
		values *= 2
	case c == 0xdf:
		values, err = size(4)
		values *= 2
	default:
		return 0, 0, fmt.Errorf("msgpack code 0x%02x is never used", c)
	}
	return n, values, err
}
