package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

var fastRetry = objstore.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}

func TestRetryRetriesTransientErrors(t *testing.T) {
	mem := objstore.NewMemStore()
	f := objstore.WithFaults(mem)
	r1 := f.Add(objstore.Rule{Op: objstore.OpPut, Times: 2, Err: objstore.ErrInjected})
	r2 := f.Add(objstore.Rule{Op: objstore.OpGet, Times: 3, Err: objstore.ErrUnavailable})
	s := objstore.WithRetry(f, fastRetry)
	if _, err := putBytes(t, s, "k", []byte("value"), objstore.CreateOnly); err != nil {
		t.Fatalf("Put failing twice of 4 attempts: %v", err)
	}
	if got := mustReadKey(t, s, "k"); got != "value" {
		t.Fatalf("Get failing 3 times of 4 attempts = %q", got)
	}
	if f.Fired(r1) != 2 || f.Fired(r2) != 3 {
		t.Fatalf("fired %d and %d", f.Fired(r1), f.Fired(r2))
	}
	if mem.CountCalls(objstore.OpPut) != 1 || mem.CountCalls(objstore.OpGet) != 1 {
		t.Fatalf("store saw %d puts and %d gets, want 1 each", mem.CountCalls(objstore.OpPut), mem.CountCalls(objstore.OpGet))
	}
}

func TestRetryGivesUpAfterMaxAttempts(t *testing.T) {
	f := objstore.WithFaults(objstore.NewMemStore())
	r := f.Add(objstore.Rule{Op: objstore.OpHead, Err: objstore.ErrInjected})
	s := objstore.WithRetry(f, fastRetry)
	if _, err := s.Head(tctx(t), "k"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("err = %v, want the last ErrInjected", err)
	}
	if f.Fired(r) != 4 {
		t.Fatalf("%d attempts, want 4", f.Fired(r))
	}
}

func TestRetryNeverRetriesAnswersAboutTheObject(t *testing.T) {
	mem := objstore.NewMemStore()
	mustPutBytes(t, mem, "k", []byte("v"))
	s := objstore.WithRetry(mem, fastRetry)
	mem.ResetCalls()
	cases := []struct {
		op   objstore.Op
		call func() error
		want error
	}{
		{objstore.OpHead, func() error { _, err := s.Head(tctx(t), "missing"); return err }, objstore.ErrNotFound},
		{objstore.OpGet, func() error { _, err := s.Get(tctx(t), "k", 5, -1); return err }, objstore.ErrInvalidRange},
		{objstore.OpPut, func() error { _, err := putBytes(t, s, "k", []byte("w"), objstore.CreateOnly); return err }, objstore.ErrPreconditionFailed},
		{objstore.OpDelete, func() error { return s.Delete(tctx(t), "a//b") }, objstore.ErrInvalidKey},
	}
	for _, tc := range cases {
		mem.ResetCalls()
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want %v", tc.op, err, tc.want)
		}
		if n := mem.CountCalls(tc.op); n != 1 {
			t.Fatalf("%s answered %v was attempted %d times, want 1", tc.op, tc.want, n)
		}
	}
}

// failAfterReading is a store whose first Put consumes part of the body
// and fails: the retry must rewind the body, not send its remainder.
type failAfterReading struct {
	objstore.ObjectStore
	failed bool
}

func (s *failAfterReading) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) (objstore.ObjectInfo, error) {
	if !s.failed {
		s.failed = true
		io.CopyN(io.Discard, r, 7)
		return objstore.ObjectInfo{}, errors.New("connection reset")
	}
	return s.ObjectStore.Put(ctx, key, r, size, opts)
}

func TestRetryRewindsSeekableBodyToItsStart(t *testing.T) {
	mem := objstore.NewMemStore()
	s := objstore.WithRetry(&failAfterReading{ObjectStore: mem}, fastRetry)
	data := []byte("0123456789abcdefghij")
	body := bytes.NewReader(data)
	body.Seek(5, io.SeekStart) // the body starts where the caller left it
	if _, err := s.Put(tctx(t), "k", body, 15, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := mustReadKey(t, mem, "k"); got != string(data[5:]) {
		t.Fatalf("stored %q, want %q", got, data[5:])
	}
}

func TestRetryDoesNotRetryUnseekableBody(t *testing.T) {
	mem := objstore.NewMemStore()
	flaky := &failAfterReading{ObjectStore: mem}
	s := objstore.WithRetry(flaky, fastRetry)
	body := io.MultiReader(bytes.NewReader([]byte("0123456789"))) // hides Seek
	if _, err := s.Put(tctx(t), "k", body, 10, objstore.PutOptions{}); err == nil {
		t.Fatal("an unseekable body was retried (and would have lost its first 7 bytes)")
	}
	if keys := mem.Keys(); len(keys) != 0 {
		t.Fatalf("stored %v", keys)
	}
}

// The caller's deadline bounds attempts and backoff sleeps together.
func TestRetryBackoffHonoursDeadline(t *testing.T) {
	f := objstore.WithFaults(objstore.NewMemStore(), objstore.Rule{Err: objstore.ErrInjected})
	s := objstore.WithRetry(f, objstore.RetryPolicy{MaxAttempts: 100, BaseDelay: time.Second, MaxDelay: time.Minute})
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.List(c, "")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("err = %v, want the deadline and the last error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("returned after %v", d)
	}
}

// Backoff grows exponentially with jitter in [d/2, d], capped at MaxDelay.
func TestRetryBackoffGrowsAndIsCapped(t *testing.T) {
	f := objstore.WithFaults(objstore.NewMemStore(), objstore.Rule{Err: objstore.ErrInjected})
	var stamps []time.Time
	s := objstore.WithRetry(f, objstore.RetryPolicy{
		MaxAttempts: 6, BaseDelay: 8 * time.Millisecond, MaxDelay: 32 * time.Millisecond,
		Retryable: func(err error) bool { stamps = append(stamps, time.Now()); return objstore.Transient(err) },
	})
	if err := s.Delete(tctx(t), "k"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatal(err)
	}
	if len(stamps) != 6 {
		t.Fatalf("%d attempts, want 6", len(stamps))
	}
	// Delays before attempts 2..6: d = 8, 16, 32, 32, 32ms; each sleep >= d/2.
	minWant := []time.Duration{4, 8, 16, 16, 16}
	var total time.Duration
	for i := 1; i < len(stamps); i++ {
		gap := stamps[i].Sub(stamps[i-1])
		total += gap
		if gap < minWant[i-1]*time.Millisecond {
			t.Fatalf("sleep %d was %v, want at least %v", i, gap, minWant[i-1]*time.Millisecond)
		}
	}
	if total > 5*time.Second {
		t.Fatalf("total backoff %v: not capped", total)
	}
}

// With ResumeGets a body torn midway re-opens at the first unread byte:
// the caller reads every byte once, in order, and never sees the tears.
func TestRetryResumesTornGetBody(t *testing.T) {
	mem := objstore.NewMemStore()
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	mustPutBytes(t, mem, "seg.log", data)
	f := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, Times: 3, FailReadAfter: 1500})
	p := fastRetry
	p.ResumeGets = true
	s := objstore.WithRetry(f, p)
	got, err := readAll(t, s, "seg.log", 1000, 6000)
	if err != nil || !bytes.Equal(got, data[1000:7000]) {
		t.Fatalf("read %d bytes, %v; want bytes [1000,7000)", len(got), err)
	}
	var offs []int64
	for _, c := range mem.Calls() {
		if c.Op == objstore.OpGet {
			offs = append(offs, c.Off)
		}
	}
	if fmtOffs := fmt.Sprint(offs); fmtOffs != "[1000 2500 4000 5500]" {
		t.Fatalf("gets at %s, want [1000 2500 4000 5500]", fmtOffs)
	}

	// Without ResumeGets the tear reaches the caller.
	f2 := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, FailReadAfter: 1500})
	if _, err := readAll(t, objstore.WithRetry(f2, fastRetry), "seg.log", 0, -1); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("err = %v, want the tear", err)
	}
	// Nor is a tear resumed more than MaxAttempts opens.
	f3 := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, FailReadAfter: 100})
	if _, err := readAll(t, objstore.WithRetry(f3, p), "seg.log", 0, -1); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("err = %v, want the tear after %d opens", err, p.MaxAttempts)
	}
}

// tearingStore's first Get body returns its first 1000 bytes together
// with an error, in one Read, and never repeats the error.
type tearingStore struct {
	objstore.ObjectStore
	torn bool
}

func (s *tearingStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := s.ObjectStore.Get(ctx, key, off, length)
	if err != nil || s.torn {
		return rc, err
	}
	s.torn = true
	b, _ := io.ReadAll(io.LimitReader(rc, 1000))
	rc.Close()
	return io.NopCloser(&oneShotTear{b: b}), nil
}

type oneShotTear struct {
	b    []byte
	done bool
}

func (r *oneShotTear) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF // a body that forgets its error: must not end the read
	}
	r.done = true
	return copy(p, r.b), errors.New("connection reset by peer")
}

func TestRetryResumesTearThatCameWithBytes(t *testing.T) {
	mem := objstore.NewMemStore()
	data := bytes.Repeat([]byte("0123456789"), 500)
	mustPutBytes(t, mem, "k", data)
	p := fastRetry
	p.ResumeGets = true
	got, err := readAll(t, objstore.WithRetry(&tearingStore{ObjectStore: mem}, p), "k", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v; want all %d", len(got), err, len(data))
	}
}
