package serverrecord

import (
	"encoding/json"
	"testing"
)

// The hand-written encoder must read back as encoding/json reads it, for
// any key or token a lock might use.
func TestAppendJSONReadsBack(t *testing.T) {
	for _, e := range []Event{
		{T: 1, Node: "n1", Kind: Set, Key: "lock-0", Token: "p1.1"},
		{T: 2, Node: "n1", Kind: Gap, End: 9, Why: `lost "the" connection\n`},
		{T: 3, Node: "n2", Kind: Set, Key: "{lock-0}\x01é\xff", TokenUnread: "tab\tand \\"},
	} {
		var got Event
		b := appendJSON(nil, &e)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		want := e
		if e.T == 3 {
			want.Key = "{lock-0}\x01é\ufffd" // as encoding/json writes a byte that is not UTF-8
		}
		if got != want {
			t.Errorf("%s read back as %+v, want %+v", b, got, want)
		}
	}
}
