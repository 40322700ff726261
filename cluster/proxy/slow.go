package proxy

import (
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// slowToxicType replaces toxiproxy's "bandwidth" toxic, which logs through
// zerolog's global logger (github.com/rs/zerolog/log, stderr) when it is
// interrupted: a user who raises zerolog's global level to trace, or a heal
// against a client that stopped reading, would see toxiproxy lines on
// stderr. Registering our own type keeps the package silent without touching
// zerolog's global state.
const slowToxicType = "lockjepsen_bandwidth"

func init() {
	toxics.Register(slowToxicType, new(slowToxic))
}

// slowToxic passes at most Rate KB (1000 bytes) per second, like toxiproxy's
// bandwidth toxic, but also stays interruptible while it waits to hand a
// chunk on, so that removing it cannot block behind a reader that stopped.
type slowToxic struct {
	Rate int64 `json:"rate"`
}

// flushTimeout bounds how long an interrupted toxic keeps trying to hand on
// the bytes it holds; dropping them would corrupt the byte stream, waiting
// forever would hang the toxic's removal.
const flushTimeout = 5 * time.Second

func (t *slowToxic) Pipe(stub *toxics.ToxicStub) {
	if t.Rate <= 0 {
		new(toxics.NoopToxic).Pipe(stub)
		return
	}
	// A Rate of bytes per millisecond; writing in slices of ≤100ms keeps the
	// flow smooth for large chunks.
	maxSlice := int(t.Rate * 100)
	var debt time.Duration
	pipeChunks(stub, func(p *stream.StreamChunk) bool {
		for off := 0; off < len(p.Data); {
			n := min(len(p.Data)-off, maxSlice)
			debt += time.Duration(n) * time.Millisecond / time.Duration(t.Rate)
			start := time.Now()
			timer := time.NewTimer(debt)
			select {
			case <-timer.C:
				// Oversleeping is paid back on the next slice.
				debt -= time.Since(start)
			case <-stub.Interrupt:
				timer.Stop()
				_ = stub.WriteOutput(&stream.StreamChunk{Data: p.Data[off:], Timestamp: p.Timestamp}, flushTimeout)
				return false
			}
			out := &stream.StreamChunk{Data: p.Data[off : off+n], Timestamp: p.Timestamp}
			select {
			case stub.Output <- out:
			case <-stub.Interrupt:
				_ = stub.WriteOutput(&stream.StreamChunk{Data: p.Data[off:], Timestamp: p.Timestamp}, flushTimeout)
				return false
			}
			off += n
		}
		return true
	})
}

// pipeChunks is the loop of a toxic: it hands each chunk to handle until
// the link closes (the input ends: the stub is closed), toxiproxy
// interrupts the toxic, or handle returns false (it was interrupted while
// it held a chunk).
func pipeChunks(stub *toxics.ToxicStub, handle func(*stream.StreamChunk) bool) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if !handle(c) {
				return
			}
		}
	}
}
