package event

import "testing"

// The dashboard's P2P read rate steps by 1000 (B/s, KB/s ...), the
// report's bytes read by 1024 (B, KiB ...): whole in the first unit, a
// tenth in the others, the last unit past its top.
func TestFormatBytesAndRateStepAtTheirOwnBase(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{FormatBytes(0), "0 B"},
		{FormatBytes(1023), "1023 B"},
		{FormatBytes(1024), "1.0 KiB"},
		{FormatBytes(1536 * 1024), "1.5 MiB"},
		{FormatBytes(3 << 30), "3.0 GiB"},
		{FormatBytes(1 << 40), "1024.0 GiB"},
		{FormatRate(999), "999 B/s"},
		{FormatRate(1000), "1.0 KB/s"},
		{FormatRate(1024), "1.0 KB/s"},
		{FormatRate(2.5e6), "2.5 MB/s"},
		{FormatRate(5e12), "5000.0 GB/s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
