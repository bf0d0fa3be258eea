// Package objstoretest is the contract every objstore.ObjectStore backend
// keeps: one suite, run against MemStore, FSStore, the decorators and S3
// (MinIO), so the tiering code can rely on the same semantics everywhere.
//
// It owns nothing but the suite; it must never depend on a backend.
//
//	func TestMyStoreContract(t *testing.T) {
//		objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore {
//			return newEmptyStore(t) // a fresh store, or a fresh prefix of a bucket
//		})
//	}
package objstoretest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

// Run runs the contract suite. newStore is called once per subtest and
// must return an empty store (for a shared bucket: a fresh prefix), which
// it cleans up itself through t.Cleanup if needed. Every call runs under
// a deadline, so a hung backend fails the test instead of hanging it.
func Run(t *testing.T, newStore func(t *testing.T) objstore.ObjectStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.ObjectStore)
	}{
		{"CreateOnlyRefusesExistingKey", testCreateOnly},
		{"CreateOnlyConcurrentCreatorsExactlyOneWins", testCreateOnlyRace},
		{"IfMatch", testIfMatch},
		{"IfMatchConcurrentIncrementsLoseNothing", testIfMatchRace},
		{"Overwrite", testOverwrite},
		{"ETagsAgree", testETagsAgree},
		{"GetRanges", testGetRanges},
		{"EmptyObject", testEmptyObject},
		{"MissingKey", testMissing},
		{"ListPrefixesSorted", testList},
		{"DeleteIdempotent", testDelete},
		{"InvalidKeysRefused", testInvalidKeys},
		{"ShortBodyStoresNothing", testShortBody},
		{"CancelledContext", testCancelled},
		{"SlowBodyHonoursDeadline", testSlowBody},
		{"GetReaderHonoursCancel", testGetReaderCancel},
		{"SlowStoreHonoursDeadline", testSlowStore},
		{"LargeObject", testLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// ctx returns a context that bounds one call of the suite.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func put(t *testing.T, s objstore.ObjectStore, key string, data []byte, opts objstore.PutOptions) (objstore.ObjectInfo, error) {
	t.Helper()
	return s.Put(ctx(t), key, bytes.NewReader(data), int64(len(data)), opts)
}

func mustPut(t *testing.T, s objstore.ObjectStore, key string, data []byte, opts objstore.PutOptions) objstore.ObjectInfo {
	t.Helper()
	info, err := put(t, s, key, data, opts)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if info.Size != int64(len(data)) || info.ETag == "" {
		t.Fatalf("Put(%q) = %+v, want size %d and an ETag", key, info, len(data))
	}
	return info
}

func get(t *testing.T, s objstore.ObjectStore, key string, off, length int64) ([]byte, error) {
	t.Helper()
	rc, err := s.Get(ctx(t), key, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func mustGet(t *testing.T, s objstore.ObjectStore, key string) []byte {
	t.Helper()
	b, err := get(t, s, key, 0, -1)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return b
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func randBytes(seed uint64, n int) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

func testCreateOnly(t *testing.T, s objstore.ObjectStore) {
	first := mustPut(t, s, "p/seg.log", []byte("first"), objstore.PutOptions{Mode: objstore.CreateOnly})
	_, err := put(t, s, "p/seg.log", []byte("second!"), objstore.PutOptions{Mode: objstore.CreateOnly})
	wantErr(t, "second CreateOnly", err, objstore.ErrPreconditionFailed)
	if got := mustGet(t, s, "p/seg.log"); string(got) != "first" {
		t.Fatalf("content after refused create = %q, want %q", got, "first")
	}
	if h, err := s.Head(ctx(t), "p/seg.log"); err != nil || h.ETag != first.ETag || h.Size != 5 {
		t.Fatalf("Head = %+v, %v; want size 5 ETag %q", h, err, first.ETag)
	}
}

func testCreateOnlyRace(t *testing.T, s objstore.ObjectStore) {
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	infos := make([]objstore.ObjectInfo, n)
	for i := range n {
		wg.Go(func() {
			data := bytes.Repeat([]byte{byte('a' + i)}, 4096+i)
			infos[i], errs[i] = put(t, s, "race/obj", data, objstore.PutOptions{Mode: objstore.CreateOnly})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("creators %d and %d both won", winner, i)
			}
			winner = i
		case !errors.Is(err, objstore.ErrPreconditionFailed):
			t.Fatalf("creator %d: %v, want nil or ErrPreconditionFailed", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no creator won")
	}
	want := bytes.Repeat([]byte{byte('a' + winner)}, 4096+winner)
	if got := mustGet(t, s, "race/obj"); !bytes.Equal(got, want) {
		t.Fatalf("stored %d bytes of %q, want the winner's (%d bytes of %q)", len(got), got[:1], len(want), want[:1])
	}
}

func testIfMatch(t *testing.T, s objstore.ObjectStore) {
	_, err := put(t, s, "m/manifest.json", []byte("v0"), objstore.PutOptions{Mode: objstore.IfMatch, ETag: "0123456789abcdef0123456789abcdef"})
	wantErr(t, "IfMatch on a missing key", err, objstore.ErrPreconditionFailed)
	if _, err := s.Head(ctx(t), "m/manifest.json"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("refused IfMatch created the key: Head err = %v", err)
	}
	v1 := mustPut(t, s, "m/manifest.json", []byte("v1"), objstore.PutOptions{Mode: objstore.CreateOnly})
	_, err = put(t, s, "m/manifest.json", []byte("vX"), objstore.PutOptions{Mode: objstore.IfMatch, ETag: "0123456789abcdef0123456789abcdef"})
	wantErr(t, "IfMatch with a wrong ETag", err, objstore.ErrPreconditionFailed)
	v2 := mustPut(t, s, "m/manifest.json", []byte("v2 longer"), objstore.PutOptions{Mode: objstore.IfMatch, ETag: v1.ETag})
	if v2.ETag == v1.ETag {
		t.Fatalf("ETag unchanged (%q) after the content changed", v2.ETag)
	}
	_, err = put(t, s, "m/manifest.json", []byte("v3"), objstore.PutOptions{Mode: objstore.IfMatch, ETag: v1.ETag})
	wantErr(t, "IfMatch with a stale ETag", err, objstore.ErrPreconditionFailed)
	if got := mustGet(t, s, "m/manifest.json"); string(got) != "v2 longer" {
		t.Fatalf("content = %q, want %q", got, "v2 longer")
	}
}

// testIfMatchRace is the manifest's read-modify-write loop from several
// writers at once: with IfMatch no increment may be lost.
func testIfMatchRace(t *testing.T, s objstore.ObjectStore) {
	const writers, each = 4, 5
	mustPut(t, s, "ctr", []byte("0"), objstore.PutOptions{Mode: objstore.CreateOnly})
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for range each {
				for {
					h, err := s.Head(ctx(t), "ctr")
					if err != nil {
						errc <- err
						return
					}
					b, err := get(t, s, "ctr", 0, -1)
					if err != nil {
						errc <- err
						return
					}
					var v int
					fmt.Sscan(string(b), &v)
					// The content may be newer than h; IfMatch h.ETag then fails and we retry.
					_, err = put(t, s, "ctr", []byte(fmt.Sprint(v+1)), objstore.PutOptions{Mode: objstore.IfMatch, ETag: h.ETag})
					if err == nil {
						break
					}
					if !errors.Is(err, objstore.ErrPreconditionFailed) {
						errc <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if got, want := string(mustGet(t, s, "ctr")), fmt.Sprint(writers*each); got != want {
		t.Fatalf("counter = %s, want %s: an IfMatch write was lost", got, want)
	}
}

func testOverwrite(t *testing.T, s objstore.ObjectStore) {
	mustPut(t, s, "o/k", []byte("one"), objstore.PutOptions{Mode: objstore.Overwrite})
	mustPut(t, s, "o/k", []byte("two!"), objstore.PutOptions{Mode: objstore.Overwrite})
	if got := mustGet(t, s, "o/k"); string(got) != "two!" {
		t.Fatalf("content = %q, want %q", got, "two!")
	}
}

func testETagsAgree(t *testing.T, s objstore.ObjectStore) {
	data := randBytes(1, 1000)
	info := mustPut(t, s, "e/a", data, objstore.PutOptions{})
	twin := mustPut(t, s, "e/b", data, objstore.PutOptions{})
	other := mustPut(t, s, "e/c", randBytes(2, 1000), objstore.PutOptions{})
	h, err := s.Head(ctx(t), "e/a")
	if err != nil {
		t.Fatal(err)
	}
	if h.ETag != info.ETag || h.Size != 1000 || h.Key != "e/a" || h.LastModified.IsZero() {
		t.Fatalf("Head = %+v, want key e/a size 1000 ETag %q and a time", h, info.ETag)
	}
	if d := time.Since(h.LastModified); d < -time.Minute || d > time.Hour {
		t.Fatalf("LastModified %v is not about now", h.LastModified)
	}
	if twin.ETag != info.ETag || other.ETag == info.ETag {
		t.Fatalf("ETags a=%q b(same bytes)=%q c(other bytes)=%q", info.ETag, twin.ETag, other.ETag)
	}
	l, err := s.List(ctx(t), "e/")
	if err != nil || len(l) != 3 || l[0].ETag != info.ETag || l[2].ETag != other.ETag {
		t.Fatalf("List = %+v, %v", l, err)
	}
}

func testGetRanges(t *testing.T, s objstore.ObjectStore) {
	data := randBytes(3, 10000)
	mustPut(t, s, "r/obj", data, objstore.PutOptions{})
	for _, tc := range []struct {
		off, length int64
		lo, hi      int
	}{
		{0, -1, 0, 10000},
		{0, 10000, 0, 10000},
		{0, 1, 0, 1},
		{1234, 100, 1234, 1334},
		{9000, -1, 9000, 10000},  // tail
		{9999, -1, 9999, 10000},  // last byte
		{9990, 100, 9990, 10000}, // length past the end is cut
		{5000, 1 << 40, 5000, 10000},
	} {
		got, err := get(t, s, "r/obj", tc.off, tc.length)
		if err != nil {
			t.Fatalf("Get(off=%d len=%d): %v", tc.off, tc.length, err)
		}
		if !bytes.Equal(got, data[tc.lo:tc.hi]) {
			t.Fatalf("Get(off=%d len=%d) = %d bytes, want bytes [%d,%d)", tc.off, tc.length, len(got), tc.lo, tc.hi)
		}
	}
	for _, off := range []int64{10000, 10001, 1 << 40} {
		_, err := get(t, s, "r/obj", off, -1)
		wantErr(t, fmt.Sprintf("Get(off=%d) of 10000 bytes", off), err, objstore.ErrInvalidRange)
		_, err = get(t, s, "r/obj", off, 10)
		wantErr(t, fmt.Sprintf("Get(off=%d, len=10) of 10000 bytes", off), err, objstore.ErrInvalidRange)
	}
}

func testEmptyObject(t *testing.T, s objstore.ObjectStore) {
	info := mustPutEmpty(t, s, "z/empty")
	h, err := s.Head(ctx(t), "z/empty")
	if err != nil || h.Size != 0 || h.ETag != info.ETag {
		t.Fatalf("Head = %+v, %v", h, err)
	}
	got, err := get(t, s, "z/empty", 0, -1)
	if err != nil || len(got) != 0 {
		t.Fatalf("Get of an empty object = %d bytes, %v", len(got), err)
	}
	_, err = get(t, s, "z/empty", 1, -1)
	wantErr(t, "Get(off=1) of an empty object", err, objstore.ErrInvalidRange)
}

func mustPutEmpty(t *testing.T, s objstore.ObjectStore, key string) objstore.ObjectInfo {
	t.Helper()
	info, err := s.Put(ctx(t), key, bytes.NewReader(nil), 0, objstore.PutOptions{Mode: objstore.CreateOnly})
	if err != nil || info.Size != 0 || info.ETag == "" {
		t.Fatalf("Put of an empty object = %+v, %v", info, err)
	}
	return info
}

func testMissing(t *testing.T, s objstore.ObjectStore) {
	_, err := s.Head(ctx(t), "nope/x")
	wantErr(t, "Head of a missing key", err, objstore.ErrNotFound)
	_, err = get(t, s, "nope/x", 0, -1)
	wantErr(t, "Get of a missing key", err, objstore.ErrNotFound)
	_, err = get(t, s, "nope/x", 5, 10)
	wantErr(t, "ranged Get of a missing key", err, objstore.ErrNotFound)
	mustPut(t, s, "nope/x/y", []byte("child"), objstore.PutOptions{})
	_, err = s.Head(ctx(t), "nope/x")
	wantErr(t, "Head of a key that only prefixes others", err, objstore.ErrNotFound)
}

func testList(t *testing.T, s objstore.ObjectStore) {
	keys := []string{"t-1/0/b", "t-1/0-x", "t-1/0/a", "t-1/1/a", "t-10/0/a", "u/a", "t-1/0/c/d"}
	for i, k := range keys {
		mustPut(t, s, k, bytes.Repeat([]byte{'x'}, i+1), objstore.PutOptions{Mode: objstore.CreateOnly})
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"t-1/0-x", "t-1/0/a", "t-1/0/b", "t-1/0/c/d", "t-1/1/a", "t-10/0/a", "u/a"}},
		{"t-1/", []string{"t-1/0-x", "t-1/0/a", "t-1/0/b", "t-1/0/c/d", "t-1/1/a"}},
		{"t-1", []string{"t-1/0-x", "t-1/0/a", "t-1/0/b", "t-1/0/c/d", "t-1/1/a", "t-10/0/a"}},
		{"t-1/0", []string{"t-1/0-x", "t-1/0/a", "t-1/0/b", "t-1/0/c/d"}},
		{"t-1/0/", []string{"t-1/0/a", "t-1/0/b", "t-1/0/c/d"}},
		{"t-1/0/a", []string{"t-1/0/a"}},
		{"t-1/0/c", []string{"t-1/0/c/d"}},
		{"t-2", nil},
		{"t-1/9/", nil},
		{"zzz/", nil},
	} {
		got, err := s.List(ctx(t), tc.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", tc.prefix, err)
		}
		var names []string
		for _, o := range got {
			names = append(names, o.Key)
			idx := -1
			for i, k := range keys {
				if k == o.Key {
					idx = i
				}
			}
			if idx < 0 || o.Size != int64(idx+1) || o.ETag == "" {
				t.Fatalf("List(%q) item %+v: want size %d and an ETag", tc.prefix, o, idx+1)
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.want) {
			t.Fatalf("List(%q) = %v, want %v", tc.prefix, names, tc.want)
		}
	}
}

func testDelete(t *testing.T, s objstore.ObjectStore) {
	mustPut(t, s, "d/x/1", []byte("1"), objstore.PutOptions{})
	mustPut(t, s, "d/x/2", []byte("2"), objstore.PutOptions{})
	for range 2 {
		if err := s.Delete(ctx(t), "d/x/1"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if err := s.Delete(ctx(t), "d/never/was"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	_, err := s.Head(ctx(t), "d/x/1")
	wantErr(t, "Head after Delete", err, objstore.ErrNotFound)
	l, err := s.List(ctx(t), "d/")
	if err != nil || len(l) != 1 || l[0].Key != "d/x/2" {
		t.Fatalf("List after Delete = %+v, %v", l, err)
	}
	if err := s.Delete(ctx(t), "d/x/2"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.List(ctx(t), "d/"); err != nil || len(l) != 0 {
		t.Fatalf("List after deleting all = %+v, %v", l, err)
	}
	// A deleted key can be created again (deletion leaves no tombstone).
	mustPut(t, s, "d/x/1", []byte("again"), objstore.PutOptions{Mode: objstore.CreateOnly})
	if got := mustGet(t, s, "d/x/1"); string(got) != "again" {
		t.Fatalf("recreated content = %q", got)
	}
}

func testInvalidKeys(t *testing.T, s objstore.ObjectStore) {
	for _, k := range []string{"", "/abs", "a//b", "a/../b", "../up", "a/./b", "trailing/", "."} {
		_, err := put(t, s, k, []byte("x"), objstore.PutOptions{})
		wantErr(t, fmt.Sprintf("Put(%q)", k), err, objstore.ErrInvalidKey)
		_, err = s.Head(ctx(t), k)
		wantErr(t, fmt.Sprintf("Head(%q)", k), err, objstore.ErrInvalidKey)
		_, err = s.Get(ctx(t), k, 0, -1)
		wantErr(t, fmt.Sprintf("Get(%q)", k), err, objstore.ErrInvalidKey)
		wantErr(t, fmt.Sprintf("Delete(%q)", k), s.Delete(ctx(t), k), objstore.ErrInvalidKey)
	}
	if l, err := s.List(ctx(t), ""); err != nil || len(l) != 0 {
		t.Fatalf("refused keys left objects: %+v, %v", l, err)
	}
}

func testShortBody(t *testing.T, s objstore.ObjectStore) {
	_, err := s.Put(ctx(t), "short", io.LimitReader(bytes.NewReader(randBytes(4, 100)), 50), 100, objstore.PutOptions{Mode: objstore.CreateOnly})
	if err == nil {
		t.Fatal("Put of 50 bytes claimed as 100 succeeded")
	}
	_, err = s.Head(ctx(t), "short")
	wantErr(t, "Head after a short Put", err, objstore.ErrNotFound)
	// A body that fails midway stores nothing either.
	body := io.MultiReader(bytes.NewReader(randBytes(5, 64)), iotestErrReader{})
	if _, err := s.Put(ctx(t), "broken", body, 128, objstore.PutOptions{}); err == nil {
		t.Fatal("Put of a failing body succeeded")
	}
	_, err = s.Head(ctx(t), "broken")
	wantErr(t, "Head after a failed body", err, objstore.ErrNotFound)
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("objstoretest: body failed") }

func testCancelled(t *testing.T, s objstore.ObjectStore) {
	mustPut(t, s, "c/k", []byte("data"), objstore.PutOptions{})
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Put(c, "c/new", bytes.NewReader([]byte("x")), 1, objstore.PutOptions{})
	wantErr(t, "Put with a cancelled context", err, context.Canceled)
	_, err = s.Get(c, "c/k", 0, -1)
	wantErr(t, "Get with a cancelled context", err, context.Canceled)
	_, err = s.Head(c, "c/k")
	wantErr(t, "Head with a cancelled context", err, context.Canceled)
	_, err = s.List(c, "c/")
	wantErr(t, "List with a cancelled context", err, context.Canceled)
	wantErr(t, "Delete with a cancelled context", s.Delete(c, "c/k"), context.Canceled)
	if _, err := s.Head(ctx(t), "c/new"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("cancelled Put stored its object: %v", err)
	}
	if _, err := s.Head(ctx(t), "c/k"); err != nil {
		t.Fatalf("cancelled Delete deleted: %v", err)
	}
}

// slowReader yields chunk bytes every delay.
type slowReader struct {
	left  int
	chunk int
	delay time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.delay)
	n := min(len(p), r.chunk, r.left)
	for i := range p[:n] {
		p[i] = 'x'
	}
	r.left -= n
	return n, nil
}

func testSlowBody(t *testing.T, s objstore.ObjectStore) {
	const size = 1 << 20
	body := &slowReader{left: size, chunk: 1024, delay: 5 * time.Millisecond} // ~5s in all
	c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Put(c, "slow", body, size, objstore.PutOptions{Mode: objstore.CreateOnly})
	if err == nil {
		t.Fatal("Put of a 5s body under a 100ms deadline succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Put returned %v after its deadline (err %v)", d, err)
	}
	_, err = s.Head(ctx(t), "slow")
	wantErr(t, "Head after a Put past its deadline", err, objstore.ErrNotFound)
}

func testGetReaderCancel(t *testing.T, s objstore.ObjectStore) {
	data := randBytes(6, 4<<20)
	mustPut(t, s, "g/big", data, objstore.PutOptions{})
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, err := s.Get(c, "g/big", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	cancel()
	n, err := io.Copy(io.Discard, rc)
	if err == nil {
		t.Fatalf("reading after cancel ended cleanly after %d more bytes", n)
	}
}

// testSlowStore checks a store that stalls (latency injected by
// objstore.WithFaults in front of it) gives the caller its context error
// at the deadline, not after the stall.
func testSlowStore(t *testing.T, s objstore.ObjectStore) {
	slow := objstore.WithFaults(s, objstore.Rule{Latency: time.Minute})
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := slow.Head(c, "anything")
	wantErr(t, "Head of a stalled store", err, context.DeadlineExceeded)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("stalled Head returned after %v", d)
	}
}

func testLarge(t *testing.T, s objstore.ObjectStore) {
	data := randBytes(7, 8<<20+13)
	info := mustPut(t, s, "big/seg.log", data, objstore.PutOptions{Mode: objstore.CreateOnly})
	if h, err := s.Head(ctx(t), "big/seg.log"); err != nil || h.Size != int64(len(data)) || h.ETag != info.ETag {
		t.Fatalf("Head = %+v, %v", h, err)
	}
	got := mustGet(t, s, "big/seg.log")
	if !bytes.Equal(got, data) {
		t.Fatalf("whole Get differs (%d bytes, want %d)", len(got), len(data))
	}
	got, err := get(t, s, "big/seg.log", 5<<20+3, 1<<20)
	if err != nil || !bytes.Equal(got, data[5<<20+3:6<<20+3]) {
		t.Fatalf("ranged Get in the middle: %d bytes, %v", len(got), err)
	}
}

// MD5Hex is the hex MD5 of b: the ETag MemStore and FSStore give, and S3
// gives for a single-part upload.
func MD5Hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}
