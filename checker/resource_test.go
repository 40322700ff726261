package checker

import (
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

func TestResource(t *testing.T) {
	f := history.I64
	cases := []struct {
		name                                string
		b                                   *hb
		checked, valid                      bool
		accepted, stale, unknown, lost, dup int
		final                               int64 // -1: nil
	}{
		{"no writes", new(hb).acquire(1, "k", 0, 1, ok, "a", 10), false, true, 0, 0, 0, 0, 0, -1},
		{"clean counter",
			new(hb).read(1, "k", 0, 1, ok, 0).write(1, "k", 2, 3, ok, 1, nil).
				read(2, "k", 4, 5, ok, 1).write(2, "k", 6, 7, ok, 2, nil).read(3, "k", 10, 11, ok, 2),
			true, true, 2, 0, 0, 0, 0, 2},
		{"interleaved: lost update",
			new(hb).read(1, "k", 0, 1, ok, 0).read(2, "k", 0, 1, ok, 0).
				write(1, "k", 2, 3, ok, 1, nil).write(2, "k", 4, 5, ok, 1, nil).read(3, "k", 10, 11, ok, 1),
			true, false, 2, 0, 0, 1, 1, 1},
		{"lost update without duplicate",
			new(hb).write(1, "k", 2, 3, ok, 1, nil).write(2, "k", 4, 5, ok, 2, nil).write(2, "k", 6, 7, ok, 3, nil).
				read(3, "k", 10, 11, ok, 2),
			true, false, 3, 0, 0, 1, 0, 2},
		{"fenced: stale write rejected, history valid",
			new(hb).read(1, "k", 0, 1, ok, 0).read(2, "k", 0, 1, ok, 0).
				write(2, "k", 2, 3, ok, 1, f(8)).write(1, "k", 4, 5, fail, 1, f(7)).read(3, "k", 10, 11, ok, 1),
			true, true, 1, 1, 0, 0, 0, 1},
		{"unknown write may explain a higher final",
			new(hb).write(1, "k", 0, 1, ok, 1, nil).write(2, "k", 2, 3, info, 2, nil).read(3, "k", 10, 11, ok, 2),
			true, true, 1, 0, 1, 0, 0, 2},
		{"final above accepted+unknown",
			new(hb).write(1, "k", 0, 1, ok, 1, nil).read(3, "k", 10, 11, ok, 5),
			true, false, 1, 0, 0, 0, 0, 5},
		{"read before the last write completed is not final",
			new(hb).write(1, "k", 0, 10, ok, 1, nil).read(3, "k", 5, 11, ok, 0),
			true, true, 1, 0, 0, 0, 0, -1},
		{"never-completed write: no final",
			new(hb).write(1, "k", 0, 1, ok, 1, nil).read(3, "k", 5, 11, ok, 1).write(2, "k", 6, -1, ok, 2, nil),
			true, true, 1, 0, 1, 0, 0, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Resource(c.b.build(t))
			if r.Checked != c.checked || r.Valid != c.valid || r.Accepted != c.accepted || r.RejectedStale != c.stale ||
				r.UnknownWrites != c.unknown || r.LostUpdates != c.lost || r.Duplicates != c.dup {
				t.Fatalf("%+v", r)
			}
			if (c.final < 0) != (r.Final == nil) || (r.Final != nil && *r.Final != c.final) {
				t.Fatalf("final = %v, want %d", r.Final, c.final)
			}
			if c.dup > 0 && (len(r.Interleaved) != c.dup || !strings.Contains(r.Interleaved[0].Story, "both wrote")) {
				t.Fatalf("interleaved = %+v", r.Interleaved)
			}
		})
	}
}

func TestResourceRejectedReads(t *testing.T) {
	r := Resource(new(hb).write(1, "k", 0, 1, ok, 1, nil).read(2, "k", 2, 3, fail, 0).build(t))
	if r.RejectedReads != 1 || r.Reads != 1 {
		t.Fatalf("%+v", r)
	}
}
