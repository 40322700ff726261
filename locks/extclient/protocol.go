// Package extclient drives a lock client written in any language: one
// operating-system process per client, spoken to in newline-delimited JSON
// on its stdin and stdout (docs/client-protocol.md). The process is the
// client, so its background threads (a library's renewal watchdog) are
// part of it, and a client pause stops the whole process.
//
// A Client is a locks.Locker, so every workload and checker treats it as
// it treats a lock written in Go; the harness stamps every invocation and
// completion on its own clock, and the client reports its belief on
// CLOCK_MONOTONIC, which Linux shares between processes, so that the
// belief converts onto the harness's clock exactly.
package extclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// ProtocolVersion is the version of the client protocol. A change that an
// existing client could misread is a new number.
const ProtocolVersion = 1

// Message types.
const (
	typeInit    = "init"
	typeInitOK  = "init_ok"
	typeAcquire = "acquire"
	typeExtend  = "extend"
	typeRelease = "release"
	typeOK      = "ok"
	typeFail    = "fail"
	typeInfo    = "info"
)

// Definite failure codes of a fail reply.
const (
	codeNotAcquired = "not-acquired"
	codeNotHeld     = "not-held"
)

// Capabilities a client declares in its init_ok.
const (
	CapFence  = "fence"
	CapExtend = "extend"
)

// Node is one node of the system, as the client dials it.
type Node struct {
	Name string `json:"name"`
	Addr string `json:"addr"` // host:port
}

// Topology is how a client finds the system it runs on, in the form each
// ecosystem's Redis and etcd clients take: the nodes for a single Redis,
// the independent nodes of Redlock, the member endpoints of etcd, the seed
// nodes of Redis Cluster; for Sentinel the sentinels and the master name.
// Every address is the one this client dials: its own link to the node
// when the run cuts links, so that network faults act on what it dials.
type Topology struct {
	// System names the system (cluster.Single, ...); "" for a probe.
	System string
	// Nodes are the data nodes (single, redlock, etcd's members, the
	// cluster's seeds; on Sentinel every Redis node, for reference).
	Nodes []Node
	// Sentinels and MasterName: how a Sentinel client finds the primary.
	Sentinels  []Node
	MasterName string
	// AddressMap maps an address the servers report (the primary the
	// sentinels name, the nodes of the cluster's slots) to the address
	// the client must dial instead, as the Go clients' dialer does; the
	// servers know each other by the cluster's internal links, which a
	// client does not use.
	AddressMap map[string]string
}

// nodeNames names the nodes at the addresses a client reports (as it
// dialed them, or as the servers reported them); unknown ones are left
// out.
func (t Topology) nodeNames(addrs []string) []string {
	byAddr := map[string]string{}
	for _, n := range append(append([]Node(nil), t.Nodes...), t.Sentinels...) {
		byAddr[n.Addr] = n.Name
	}
	var names []string
	for _, a := range addrs {
		if mapped, ok := t.AddressMap[a]; ok {
			a = mapped
		}
		if name, ok := byAddr[a]; ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// request is every message the harness sends.
type request struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`

	// init
	Protocol    int    `json:"protocol,omitempty"`
	Process     int    `json:"process,omitempty"`
	Nodes       []Node `json:"nodes,omitempty"`
	TokenPrefix string `json:"token_prefix,omitempty"`
	OpTimeoutMS int64  `json:"op_timeout_ms,omitempty"`
	// Added in protocol 1 without a new version (a client ignores fields
	// it does not know).
	System     string            `json:"system,omitempty"`
	Sentinels  []Node            `json:"sentinels,omitempty"`
	MasterName string            `json:"master_name,omitempty"`
	AddressMap map[string]string `json:"address_map,omitempty"`

	// acquire, extend, release
	Key   string `json:"key,omitempty"`
	TTLMS int64  `json:"ttl_ms,omitempty"`
	Token string `json:"token,omitempty"`
}

// reply is every message a client sends.
type reply struct {
	Type      string `json:"type"`
	InReplyTo *int64 `json:"in_reply_to"`

	// init_ok
	Protocol     int      `json:"protocol,omitempty"`
	Name         string   `json:"name,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	// Systems the client runs on; absent: single and redlock, the
	// systems of protocol 1's first clients, which dial nodes[0] or
	// every node.
	Systems []string `json:"systems,omitempty"`

	// ok
	Token string `json:"token,omitempty"`
	// ValidUntilMonoNS is the end of the client's belief, in ns of
	// CLOCK_MONOTONIC (absolute, not remaining); absent: no deadline.
	ValidUntilMonoNS *int64 `json:"valid_until_mono_ns,omitempty"`
	// StartedMonoNS is when the client began the operation (CLOCK_MONOTONIC,
	// read just before it called its lock), optional: the lease model
	// counts the TTL from it instead of from the harness's invoke, which
	// the pipe and the client's scheduling delay.
	StartedMonoNS *int64 `json:"started_mono_ns,omitempty"`
	Fence         *int64 `json:"fence,omitempty"`
	// GrantedBy, optional: the addresses of the nodes that granted (as the
	// client dialed them), for the witness and for faults aimed at the
	// holder's nodes on locks whose keys the harness cannot read.
	GrantedBy []string `json:"granted_by,omitempty"`

	// fail and info
	Error string `json:"error,omitempty"`
}

// ProtocolError is a client that broke the protocol: output that is not
// a message, a reply to a request never sent, a reply of the wrong type.
// The client cannot be trusted afterwards.
type ProtocolError struct {
	Line   string
	Reason string
}

func (e *ProtocolError) Error() string {
	line := e.Line
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return fmt.Sprintf("%s: %q", e.Reason, line)
}

// parseReply reads one line of a client's stdout.
func parseReply(line []byte) (*reply, error) {
	var r reply
	if err := json.Unmarshal(line, &r); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return nil, &ProtocolError{Line: string(line), Reason: fmt.Sprintf("field %q must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type), sentKind(typeErr.Value))}
		}
		return nil, &ProtocolError{Line: string(line), Reason: "not a protocol message (one JSON object per line; print logs to stderr)"}
	}
	if err := r.checkTimes(); err != "" {
		return nil, &ProtocolError{Line: string(line), Reason: err}
	}
	if r.InReplyTo == nil {
		return nil, &ProtocolError{Line: string(line), Reason: "a message without in_reply_to"}
	}
	switch r.Type {
	case typeInitOK, typeOK, typeFail, typeInfo:
	default:
		return nil, &ProtocolError{Line: string(line), Reason: fmt.Sprintf("unknown message type %q (want init_ok, ok, fail or info)", r.Type)}
	}
	return &r, nil
}

// checkTimes refuses a time no CLOCK_MONOTONIC reading can be (zero or
// negative): recorded as is, it made a history the checkers refuse, so
// the run failed as malformed without naming the client, and could never
// be checked again.
func (r *reply) checkTimes() string {
	for _, f := range []struct {
		name string
		ns   *int64
	}{{"valid_until_mono_ns", r.ValidUntilMonoNS}, {"started_mono_ns", r.StartedMonoNS}} {
		if f.ns != nil && *f.ns <= 0 {
			return fmt.Sprintf("%s must be a positive CLOCK_MONOTONIC time in ns, got %d", f.name, *f.ns)
		}
	}
	return ""
}

// jsonKind names a Go type as the JSON a client should have sent.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// sentKind names what a client sent, from encoding/json's word for it.
func sentKind(value string) string {
	switch value {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	case "string", "number":
		return "a " + value
	}
	return value
}
