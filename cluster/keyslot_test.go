package cluster

import (
	"fmt"
	"strings"
	"testing"
)

// The expected slots are Redis 7's answers to CLUSTER KEYSLOT.
func TestKeySlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"lock-0", 1955},
		{"123456789", 12739}, // CRC16/XMODEM's check value 0x31C3
		{"{user1000}.following", KeySlot("user1000")},
		{"foo{bar}{zap}", KeySlot("bar")},  // the first tag only
		{"foo{{bar}}zap", KeySlot("{bar")}, // from the first "{" to the next "}"
		{"foo{}{bar}", 8363},               // an empty tag: the whole key
		{"", 0},
	} {
		if got := KeySlot(tc.key); got != tc.slot {
			t.Errorf("KeySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

func TestSlotRange(t *testing.T) {
	next := 0
	for i := 0; i < 3; i++ {
		lo, hi := SlotRange(i, 3)
		if lo != next || hi < lo {
			t.Fatalf("primary %d: %d-%d after %d", i, lo, hi, next)
		}
		next = hi + 1
	}
	if next != ClusterSlots {
		t.Fatalf("the ranges end at %d, not %d", next, ClusterSlots)
	}
	if lo, hi := SlotRange(0, 3); lo != 0 || hi != 5460 {
		t.Errorf("SlotRange(0, 3) = %d-%d, want redis-cli's 0-5460", lo, hi)
	}
}

// TestTopology: a report shows Redis Cluster's slot layout, and nothing
// for systems whose node list says it all.
func TestTopology(t *testing.T) {
	var six []Node
	for i := 1; i <= 6; i++ {
		six = append(six, Node{Name: fmt.Sprintf("n%d", i)})
	}
	for _, c := range []struct {
		system string
		want   string
	}{
		{RedisCluster, "Redis Cluster of 3 primaries, as started (lock-0 is in slot "},
		{RedisCluster, "n1 slots 0-5460, replica n4; n2 slots 5461-10921, replica n5; n3 slots 10922-16383, replica n6"},
		{Sentinel, ""},
		{Single, ""},
	} {
		got := Topology(c.system, six)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.system, got, c.want)
		}
	}
}
