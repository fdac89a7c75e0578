package doctor

import (
	"errors"
	"testing"
)

// TestOrphansAreAFailedCheckNamingTheFix: state a dead p2pfault left is a
// ✗ naming each piece and `p2pfault cleanup --orphans`; none is a ✓, also
// when the tables cannot be listed (said so); a host without the check
// (nil) prints no line.
func TestOrphansAreAFailedCheckNamingTheFix(t *testing.T) {
	for _, tt := range []struct {
		name    string
		orphans func() ([]string, error)
		want    string
	}{
		{"two orphans", func() ([]string, error) {
			return []string{"firewall table inet p2pfault_main-partition-4242.77-abcdef of p2pfault pid 4242 (gone)", "engine session 4300 (sleep, pids [4300]) of p2pfault pid 4242 (gone)"}, nil
		}, "✗ leftovers: 2 orphans left by a p2pfault that is gone: firewall table inet p2pfault_main-partition-4242.77-abcdef of p2pfault pid 4242 (gone); engine session 4300 (sleep, pids [4300]) of p2pfault pid 4242 (gone) → `p2pfault cleanup --orphans` deletes such tables and ends such engines"},
		{"none", func() ([]string, error) { return nil, nil }, "✓ leftovers: no firewall table or engine of a p2pfault that is gone"},
		{"tables not listed", func() ([]string, error) { return nil, errors.New("firewall tables not listed: no rights") },
			"✓ leftovers: no engine of a p2pfault that is gone; firewall tables not listed: no rights"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := Orphans(Host{Orphans: tt.orphans})
			if len(rs) != 1 || rs[0].String() != tt.want {
				t.Errorf("got %q\nwant %q", lines(rs), tt.want)
			}
		})
	}
	if rs := Orphans(Host{}); len(rs) != 0 {
		t.Errorf("a host without the check: %q, want no line", lines(rs))
	}
}
