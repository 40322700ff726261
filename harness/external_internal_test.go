package harness

import "testing"

// TestClientScript: the script a client's interpreter runs, which a run
// checks is there; none for a Go lock (no argv), a program alone, or code
// given inline.
func TestClientScript(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{nil, ""},
		{[]string{"sleep"}, ""},
		{[]string{"sleep", "1000"}, ""},
		{[]string{"python3", "-u", "examples/python/token_lock.py", "--fenced"}, "examples/python/token_lock.py"},
		{[]string{"php", "lock.php"}, "lock.php"},
		{[]string{"node", "-e", "require('x.js'); run()"}, ""},
	} {
		if got := clientScript(c.argv); got != c.want {
			t.Errorf("%q: %q, want %q", c.argv, got, c.want)
		}
	}
}
