package reports

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// A Redis Cluster run's report says which primary has which slots and
// replica, and every run's report says when its primary changed.
func TestTopologyAndFailoverRows(t *testing.T) {
	var nodes []cluster.Node
	for i := 1; i <= 6; i++ {
		nodes = append(nodes, cluster.Node{Name: fmt.Sprintf("n%d", i), Addr: "127.0.0.1:1"})
	}
	failovers := []runfile.Failover{{At: 4_500_000_000, From: "n1", To: "n4", AfterFault: "isolate on [n1]", Duration: 2_200_000_000}}
	for _, tc := range []struct {
		system string
		want   map[string]string // row → a part of its value; "" means no such row
	}{
		{cluster.RedisCluster, map[string]string{
			"topology":  "n1 slots 0-5460, replica n4; n2 slots 5461-10921, replica n5; n3 slots 10922-16383, replica n6",
			"failovers": "n1 → n4 at 4.5s, 2.2s after isolate on [n1] started",
		}},
		{cluster.Sentinel, map[string]string{"topology": "", "failovers": "n1 → n4"}},
	} {
		c := &runConfig{Settings: runfile.Settings{System: tc.system}}
		rows := map[string]string{}
		for _, r := range configRows(c, &runInfo{Nodes: nodes, Failovers: failovers}) {
			rows[r[0]] = r[1]
		}
		for row, part := range tc.want {
			got, ok := rows[row]
			if part == "" && ok || part != "" && !strings.Contains(got, part) {
				t.Errorf("%s: row %q is %q (present %v), want %q", tc.system, row, got, ok, part)
			}
		}
	}
}
