// Package etcdq asks etcd members what the harness and the local backend
// need to know (their version, status and health) over etcd's JSON
// gateway, as sentinelq asks sentinels.
package etcdq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// The harness talks to the etcd members over etcd's own JSON gateway on
// their client URLs (the same port as gRPC), not through etcd's Go client:
// the core module must not require the etcd client, or every user of the
// Go API would get this module's version of it forced on them. Paths are
// under /v3/, which etcd serves from 3.4 on (3.4 also serves /v3beta/,
// which 3.5 dropped). The gateway writes proto field names and, as proto3's
// JSON mapping does, 64-bit integers as strings.

// httpClient is shared by every caller: connections to a
// member are reused across polls, and a stopped member's connections close
// with it.
var httpClient = &http.Client{
	Transport: &http.Transport{
		// All traffic stays on loopback: never through $HTTP_PROXY.
		Proxy: nil,
		// A member that is not up refuses at once; the bound is for a
		// listener whose accept queue a loaded machine is slow on.
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	},
	// A backstop only: every call of the backend has a deadline of its own
	// (a paused member never answers, a linearizable read on an isolated
	// one waits for etcd's request timeout).
	Timeout: 30 * time.Second,
}

// Uint64 decodes a 64-bit integer of the gateway, which proto3's JSON
// mapping quotes (a bare number is accepted too).
type Uint64 uint64

func (u *Uint64) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if n := len(s); n >= 2 && s[0] == '"' && s[n-1] == '"' {
		s = s[1 : n-1]
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a uint64: %s", b)
	}
	*u = Uint64(v)
	return nil
}

// Status is the part of a maintenance/status answer the backend reads.
type Status struct {
	Header struct {
		MemberID Uint64 `json:"member_id"`
	} `json:"header"`
	Leader   Uint64   `json:"leader"` // 0 (absent) when the member knows no leader
	RaftTerm Uint64   `json:"raftTerm"`
	Errors   []string `json:"errors"` // alarms, such as NOSPACE
}

// RangeRequest is a linearizable kv/range request for one key; []byte
// goes as base64, which is what the gateway expects for proto bytes.
type RangeRequest struct {
	Key []byte `json:"key"`
}

// GatewayError is a gateway answer other than 200 OK: the gRPC error
// of the call (such as "etcdserver: request timed out"), or, without a
// JSON body, the HTTP status alone.
type GatewayError struct {
	Status  int
	Code    int
	Message string
}

func (e *GatewayError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d, gRPC code %d)", e.Message, e.Status, e.Code)
}

// Call sends one gateway request to the member at addr (host:port):
// a POST of req as JSON, or a GET when req is nil; a 200 answer is decoded
// into resp. Errors name the path or URL, not the member: callers add that.
func Call(ctx context.Context, addr, path string, req, resp any) error {
	method, body := http.MethodGet, io.Reader(nil)
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		method, body = http.MethodPost, bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if req != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	r, err := httpClient.Do(hr)
	if err != nil {
		return err // a *url.Error: it names the method and URL already
	}
	defer r.Body.Close()
	// Answers are small; the bound is against a stray server on the port.
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if r.StatusCode != http.StatusOK {
		ge := &GatewayError{Status: r.StatusCode}
		var eb struct {
			Error   string `json:"error"`
			Message string `json:"message"`
			Code    int    `json:"code"`
		}
		if json.Unmarshal(b, &eb) == nil {
			ge.Code, ge.Message = eb.Code, eb.Message
			if ge.Message == "" {
				ge.Message = eb.Error
			}
		}
		return fmt.Errorf("%s %s: %w", method, path, ge)
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// versionTimeout bounds Version: the version is informational, and a
// member that is paused or gone must not hold up its caller.
const versionTimeout = 2 * time.Second

// Version is the server version of the etcd member whose client URL is at
// addr (host:port), as its /version answers, or "" if it does not answer
// within 2 s.
func Version(ctx context.Context, addr string) string {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	var v struct {
		Server string `json:"etcdserver"`
	}
	if err := Call(ctx, addr, "/version", nil, &v); err != nil {
		return ""
	}
	return v.Server
}
