package clusterq

import (
	"strings"
	"testing"
)

// healthyNodes is CLUSTER NODES of a healthy 3+3 cluster, as n1 sees it.
const healthyNodes = `
a1 10.0.0.1:10001@30001 myself,master - 0 0 1 connected 0-5460
a2 10.0.0.1:10002@30002 master - 0 1 2 connected 5461-10922
a3 10.0.0.1:10003@30003 master - 0 1 3 connected 10923-16383
a4 10.0.0.1:10004@30004 slave a1 0 1 1 connected
a5 10.0.0.1:10005@30005 slave a2 0 1 2 connected
a6 10.0.0.1:10006@30006 slave a3 0 1 3 connected
`

// checkView passes a healthy view and names what is wrong with others;
// the parser reads slot ranges, single slots, and skips slots in
// migration.
func TestCheckView(t *testing.T) {
	for _, tc := range []struct {
		name, edit, with string
		want             string // "" for healthy
	}{
		{"healthy", "", "", ""},
		{"a node failing", "a2 10.0.0.1:10002@30002 master", "a2 10.0.0.1:10002@30002 master,fail", "sees node a2 as master,fail"},
		{"a node suspected", "a5 10.0.0.1:10005@30005 slave", "a5 10.0.0.1:10005@30005 slave,fail?", "sees node a5 as slave,fail?"},
		{"a primary without a replica", "slave a3", "slave a1", "primary a3 without a replica"},
		{"a primary without slots", " connected 10923-16383", " connected", "2 primaries with slots, not 3"},
		{"migrating slots are not served", " connected 10923-16383", " connected [10923->-a1]", "2 primaries with slots, not 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := healthyNodes
			if tc.edit != "" {
				if !strings.Contains(text, tc.edit) {
					t.Fatalf("fixture has no %q", tc.edit)
				}
				text = strings.Replace(text, tc.edit, tc.with, 1)
			}
			err := checkView("n1", parseClusterNodes(text), 3)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("healthy view refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestParseClusterNodes(t *testing.T) {
	nodes := parseClusterNodes(healthyNodes + "a7 10.0.0.1:10007@30007 master - 0 1 7 connected 5 7-9 [11->-a1]\n")
	if len(nodes) != 7 {
		t.Fatalf("%d nodes, want 7", len(nodes))
	}
	n := nodes[6]
	for slot, want := range map[int]bool{5: true, 6: false, 7: true, 9: true, 10: false, 11: false} {
		if n.serves(slot) != want {
			t.Errorf("a7 serves %d: %v, want %v", slot, !want, want)
		}
	}
	if n.epoch != 7 || !n.is("master") || n.is("slave") {
		t.Errorf("a7: epoch %d, flags %q", n.epoch, n.flags)
	}
	if !nodes[0].is("myself") || nodes[3].primaryID != "a1" {
		t.Errorf("a1 flags %q, a4's primary %q", nodes[0].flags, nodes[3].primaryID)
	}
}
