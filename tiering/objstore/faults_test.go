package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

func TestFaultsNthMatchingCallFails(t *testing.T) {
	mem := objstore.NewMemStore()
	f := objstore.WithFaults(mem)
	boom := errors.New("boom")
	rule := f.Add(objstore.Rule{Op: objstore.OpPut, Key: "t/0/*.log", Nth: 2, Err: boom})
	for i, tc := range []struct {
		key  string
		fail bool
	}{
		{"t/0/a.log", false},
		{"t/0/a.index", false}, // does not match the glob: not counted
		{"t/1/b.log", false},   // nor this one ('*' stops at '/')
		{"t/0/b.log", true},    // second match
		{"t/0/c.log", false},
	} {
		_, err := putBytes(t, f, tc.key, []byte("x"), objstore.CreateOnly)
		if tc.fail != (err != nil) || (err != nil && !errors.Is(err, boom)) {
			t.Fatalf("call %d (%s): err = %v, want fail=%v", i, tc.key, err, tc.fail)
		}
	}
	if f.Fired(rule) != 1 {
		t.Fatalf("fired %d times, want 1", f.Fired(rule))
	}
	// The injected failure never reached the store.
	if got := mem.CountCalls(objstore.OpPut); got != 4 {
		t.Fatalf("store saw %d puts, want 4", got)
	}
}

func TestFaultsProbabilityIsSeededAndTimesBounds(t *testing.T) {
	run := func(seed uint64) (fails int, pattern string) {
		f := objstore.WithFaults(objstore.NewMemStore())
		f.Seed(seed)
		f.Add(objstore.Rule{Op: objstore.OpHead, Prob: 0.3, Err: objstore.ErrInjected})
		for range 1000 {
			_, err := f.Head(context.Background(), "k")
			if errors.Is(err, objstore.ErrInjected) {
				fails++
				pattern += "x"
			} else {
				pattern += "."
			}
		}
		return fails, pattern
	}
	n1, p1 := run(7)
	n2, p2 := run(7)
	if p1 != p2 {
		t.Fatal("same seed, different fault pattern")
	}
	if n1 != n2 || n1 < 230 || n1 > 370 {
		t.Fatalf("%d of 1000 calls failed at p=0.3", n1)
	}
	_, p3 := run(8)
	if p3 == p1 {
		t.Fatal("another seed gave the same pattern")
	}

	f := objstore.WithFaults(objstore.NewMemStore())
	r := f.Add(objstore.Rule{Times: 3, Err: objstore.ErrInjected})
	fails := 0
	for range 10 {
		if err := f.Delete(context.Background(), "k"); err != nil {
			fails++
		}
	}
	if fails != 3 || f.Fired(r) != 3 {
		t.Fatalf("Times 3: %d failures, fired %d", fails, f.Fired(r))
	}
}

// A lost acknowledgement: the object is stored but the caller hears an
// error; a retried CreateOnly then gets ErrPreconditionFailed and Head
// shows the caller's own bytes.
func TestFaultsLostPutAcknowledgement(t *testing.T) {
	mem := objstore.NewMemStore()
	f := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpPut, Nth: 1, LostAck: true})
	data := []byte("segment bytes")
	_, err := putBytes(t, f, "seg.log", data, objstore.CreateOnly)
	if !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("first Put err = %v, want ErrInjected", err)
	}
	if got := mustReadKey(t, mem, "seg.log"); got != string(data) {
		t.Fatalf("stored %q, want the write to have happened", got)
	}
	_, err = putBytes(t, f, "seg.log", data, objstore.CreateOnly)
	if !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("retried Put err = %v, want ErrPreconditionFailed", err)
	}
	h, err := f.Head(tctx(t), "seg.log")
	if err != nil || h.Size != int64(len(data)) {
		t.Fatalf("Head = %+v, %v", h, err)
	}
}

func TestFaultsTornReadAfterNBytes(t *testing.T) {
	mem := objstore.NewMemStore()
	data := bytes.Repeat([]byte("abcdefgh"), 1000)
	mustPutBytes(t, mem, "k", data)
	f := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, FailReadAfter: 1000})
	rc, err := f.Get(tctx(t), "k", 100, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if !errors.Is(err, objstore.ErrInjected) || !bytes.Equal(got, data[100:1100]) {
		t.Fatalf("read %d bytes, err %v; want 1000 good bytes then ErrInjected", len(got), err)
	}
	// The rule fires on every Get (Nth 0), a short range ends before the tear.
	if b, err := readAll(t, f, "k", 0, 500); err != nil || len(b) != 500 {
		t.Fatalf("short read: %d, %v", len(b), err)
	}
}

func TestFaultsOutageDownUp(t *testing.T) {
	mem := objstore.NewMemStore()
	mustPutBytes(t, mem, "k", bytes.Repeat([]byte("x"), 100))
	f := objstore.WithFaults(mem)
	rc, err := f.Get(tctx(t), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	mem.ResetCalls()
	f.Down()
	if _, err := rc.Read(make([]byte, 10)); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("read of an open body during the outage: %v", err)
	}
	if _, err := putBytes(t, f, "k2", []byte("y"), objstore.CreateOnly); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Put: %v", err)
	}
	if _, err := f.Get(tctx(t), "k", 0, -1); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Get: %v", err)
	}
	if _, err := f.Head(tctx(t), "k"); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Head: %v", err)
	}
	if _, err := f.List(tctx(t), ""); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("List: %v", err)
	}
	if err := f.Delete(tctx(t), "k"); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Delete: %v", err)
	}
	if n := mem.CountCalls(""); n != 0 {
		t.Fatalf("%d calls reached the store during the outage", n)
	}
	f.Up()
	if _, err := putBytes(t, f, "k2", []byte("y"), objstore.CreateOnly); err != nil {
		t.Fatalf("Put after Up: %v", err)
	}
	if got := listKeys(t, f, ""); len(got) != 2 {
		t.Fatalf("List after Up = %v", got)
	}
}

func TestFaultsLatencyIsCutByContext(t *testing.T) {
	f := objstore.WithFaults(objstore.NewMemStore(), objstore.Rule{Op: objstore.OpList, Latency: 30 * time.Millisecond})
	start := time.Now()
	if _, err := f.List(tctx(t), ""); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("List took %v, want at least the injected 30ms", d)
	}
	f.Clear()
	f.Add(objstore.Rule{Latency: time.Hour})
	c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err := f.Put(c, "k", bytes.NewReader([]byte("x")), 1, objstore.PutOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("Put under an hour's latency: %v after %v", err, time.Since(start))
	}
}
