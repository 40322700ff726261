package nemesis

import (
	"reflect"
	"testing"
)

func TestParseList(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"none", nil, true},
		{"client-pause", []string{"client-pause"}, true},
		{"client-pause, client-crash,client-pause", []string{"client-pause", "client-crash"}, true},
		{"client-pause,meteor", nil, false},
	}
	for _, tc := range cases {
		got, err := ParseList(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%q: got %v, %v", tc.in, got, err)
		}
	}
}
