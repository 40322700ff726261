package runfile

import (
	"slices"
	"testing"
)

// A client's arguments come back as the flags that set them: an argument
// with a space (or an empty one) as --client-arg, taken whole, since
// --client is split at spaces and folding it in did not reproduce the run
// (issue 53, item 17).
func TestClientFlags(t *testing.T) {
	cases := []struct {
		argv []string
		want []string
	}{
		{[]string{"python3", "lock.py"}, []string{"--client", "python3 lock.py"}},
		{[]string{"python3", "lock.py", "--config=/etc/my lock.conf"}, []string{"--client", "python3 lock.py", "--client-arg", "--config=/etc/my lock.conf"}},
		{[]string{"sh", "-c", "exec python3 lock.py", "x"}, []string{"--client", "sh -c", "--client-arg", "exec python3 lock.py", "--client-arg", "x"}},
		{[]string{"node", "lock.js", ""}, []string{"--client", "node lock.js", "--client-arg", ""}},
	}
	for _, tc := range cases {
		got := Settings{Client: tc.argv}.Flags(Settings{})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.argv, got, tc.want)
		}
	}
}
