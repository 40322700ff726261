package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// A host that accepts the connection and never answers the SSH handshake:
// the dial cut short by an interrupt is not made again for the clean-up
// (issue 53, item 5: 56 s after a Ctrl-C, each 15 s dial run out, then
// another to write the marker). Missing key and known_hosts files are
// refused up front (item 15).
func TestSilentHostIsDialedOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent
		}
	}()
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "id"), pem.EncodeToMemory(block), 0o600)
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	text := "known_hosts: " + filepath.Join(dir, "known_hosts") + "\nnodes:\n  - {name: n1, ssh: " + ln.Addr().String() + ", key: id, dir: /srv/lj/n1, address: 127.0.0.1}\n"
	h, err := ParseHosts(filepath.Join(dir, "hosts.yaml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CheckFiles(false); err != nil {
		t.Fatalf("files present: %v", err)
	}
	r := NewRunner(h, false, false, nil)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Run(ctx, h.Nodes[0], "true"); err == nil {
		t.Fatal("a silent host ran a command")
	}
	start := time.Now()
	_, err = r.Run(context.Background(), h.Nodes[0], "true")
	if err == nil || !strings.Contains(err.Error(), "not dialed again") {
		t.Fatalf("second run: %v, want it refused without a dial", err)
	}
	// Not a timing claim about the machine: a second dial waits out the
	// 15 s DialTimeout.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the second run took %v", took)
	}

	os.Remove(filepath.Join(dir, "known_hosts"))
	if err := h.CheckFiles(false); err == nil || !strings.Contains(err.Error(), "known_hosts") {
		t.Errorf("missing known_hosts: %v", err)
	}
	if err := h.CheckFiles(true); err != nil {
		t.Errorf("missing known_hosts with trust on first use: %v", err)
	}
	os.Remove(filepath.Join(dir, "id"))
	if err := h.CheckFiles(true); err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("missing key: %v", err)
	}
}
