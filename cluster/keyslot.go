package cluster

import (
	"fmt"
	"strings"
)

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key,
// or of its hash tag (the part between the first "{" and the next "}",
// when that part is not empty), modulo ClusterSlots.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % ClusterSlots
}

// SlotRange is the range of hash slots primary i (0-based) of p serves
// when the slots are split evenly, as redis-cli --cluster create does.
func SlotRange(i, p int) (lo, hi int) {
	per := float64(ClusterSlots) / float64(p)
	lo = int(float64(i) * per)
	hi = int(float64(i+1)*per) - 1
	if i == p-1 {
		hi = ClusterSlots - 1
	}
	return lo, hi
}

// Topology describes, for a report, a system whose layout its node list
// does not show, as it started (its descriptor's Layout): on Redis
// Cluster each primary with its slots and its replica. It is "" for the
// others.
func Topology(system string, nodes []Node) string {
	if d, err := LookupSystem(system); err == nil && d.Layout != nil {
		return d.Layout(nodes)
	}
	return ""
}

// slotLayout is Redis Cluster's Layout: nP+i replicates ni.
func slotLayout(nodes []Node) string {
	p := len(nodes) / 2
	var parts []string
	for i := 0; i < p && p+i < len(nodes); i++ {
		lo, hi := SlotRange(i, p)
		parts = append(parts, fmt.Sprintf("%s slots %d-%d, replica %s", nodes[i].Name, lo, hi, nodes[p+i].Name))
	}
	return fmt.Sprintf("Redis Cluster of %d primaries, as started (lock-0 is in slot %d): %s", p, KeySlot("lock-0"), strings.Join(parts, "; "))
}
