package history

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecode: no input makes the reader panic or hang, and whatever it
// accepts encodes back to events it accepts again.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		"",
		"\n\n",
		`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k","value":{"ttl":5}}` + "\n",
		`{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"acquire","key":"k","value":{"token":"t","valid_until":9,"fence":3,"nodes":["n1"]}}` + "\n",
		`{"index":0,"time":1,"process":"nemesis","type":"info","f":"pause","value":{"phase":"start","targets":["n1"]}}` + "\n",
		`{"index":0,"time":1,"process":0,"type":"invoke","f":"write","key":"k","value":{"n":1}}` + "\n" + `{"index":1,"ti`,
		`{"index":0,"time":-1,"process":-5,"type":"ok","f":""}`,
		`[1,2,3]`,
		`{"index":1e309}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		done := make(chan struct{})
		var res *ReadResult
		var err error
		go func() {
			defer close(done)
			res, err = Decode(bytes.NewReader(data), "fuzz")
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Decode hung")
		}
		if err != nil {
			return
		}
		var buf bytes.Buffer
		for i := range res.Ops {
			buf.Write(AppendJSON(nil, &res.Ops[i]))
			buf.WriteByte('\n')
		}
		again, err := Decode(&buf, "again")
		if err != nil {
			t.Fatalf("re-encoded history rejected: %v\n%s", err, buf.String())
		}
		if len(again.Ops) != len(res.Ops) {
			t.Fatalf("%d events became %d", len(res.Ops), len(again.Ops))
		}
		Pair(res.Ops)
	})
}
