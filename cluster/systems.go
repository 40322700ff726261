package cluster

import (
	"fmt"
	"time"
)

// The built-in systems' descriptors; systemList orders them.

var singleSystem = System{
	Name: Single, Title: "one redis-server", DefaultNodes: 1, Server: ServerRedis, ReferenceLock: "token",
	CheckNodes: func(n int) error {
		if n != 1 {
			return fmt.Errorf("has exactly 1 node, not %d", n)
		}
		return nil
	},
}

var sentinelSystem = System{
	Name: Sentinel, Title: "a primary, its replicas and the sentinels that fail it over", DefaultNodes: 3,
	Server: ServerRedis, ReferenceLock: "token", StartOverhead: 5 * time.Second,
	CheckNodes: func(n int) error {
		if n < 2 {
			return fmt.Errorf("needs at least 2 nodes (a primary and a replica), not %d", n)
		}
		return nil
	},
	// The first node starts as the primary.
	Role: func(i, _ int) string {
		if i == 1 {
			return RolePrimary
		}
		return RoleReplica
	},
	Reach:    ReachSentinels,
	Replicas: func(n int) int { return n - 1 },
	Peers:    "replication and the sentinels",
}

var redlockSystem = System{
	Name: Redlock, Title: "independent redis-servers, for Redlock", DefaultNodes: 5,
	Server: ServerRedis, ReferenceLock: "redlock", StartOverhead: 2 * time.Second, Majority: true,
	CheckNodes: func(n int) error {
		if n < 3 || n%2 == 0 {
			return fmt.Errorf("needs an odd number of nodes, at least 3, not %d", n)
		}
		return nil
	},
}

var etcdSystem = System{
	Name: Etcd, Title: "etcd members (raft): the consensus baseline", DefaultNodes: 3,
	Server: ServerEtcd, ReferenceLock: "etcd", Reach: ReachAddresses, Peers: "raft",
	CheckNodes: func(n int) error {
		if n < 1 || n%2 == 0 {
			return fmt.Errorf("needs an odd number of members, at least 1, not %d", n)
		}
		return nil
	},
	OwnPersistence:     "etcd syncs its log before it answers",
	NoWallClock:        "its leases run on monotonic timers",
	ServerRenewsLeases: "etcd's leader renews every lease when leadership changes, so a key may outlive its TTL",
	// etcd grants leases in whole seconds: LeaseGrant takes a TTL in
	// seconds.
	TTL: TTLRule{Default: time.Second, Unit: time.Second, Why: "whole seconds"},
}

var redisClusterSystem = System{
	Name: RedisCluster, Title: "Redis Cluster: primaries that share the hash slots, a replica each", DefaultNodes: 2 * MinClusterPrimaries,
	Server: ServerRedis, ReferenceLock: "token", StartOverhead: 2 * time.Second,
	CheckNodes: func(n int) error {
		if n < 2*MinClusterPrimaries || n%2 != 0 {
			return fmt.Errorf("needs an even number of nodes, at least %d (each primary has one replica), not %d", 2*MinClusterPrimaries, n)
		}
		return nil
	},
	// The first half are the primaries; node P+i replicates node i.
	Role: func(i, n int) string {
		if i <= n/2 {
			return RolePrimary
		}
		return RoleReplica
	},
	Reach:         ReachSlots,
	Replicas:      func(int) int { return 1 },
	Peers:         "replication and the cluster bus",
	ClockTimeouts: "each node counts the cluster's gossip timeouts on its own clock",
	Layout:        slotLayout,
}
