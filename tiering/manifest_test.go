package tiering

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

// rewrite is the -rewrite flag cockroachdb/datadriven registers (the
// planner's scripts use it too): one flag rewrites every golden file.
func rewrite() bool { return flag.Lookup("rewrite").Value.(flag.Getter).Get().(bool) }

func TestManifestValidateAcceptsWellFormed(t *testing.T) {
	for _, m := range []Manifest{
		testManifest(),
		testManifest(0),
		testManifest(0, 100, 250, 1000),
	} {
		if err := m.Validate(); err != nil {
			t.Fatalf("Validate(%+v): %v", m, err)
		}
	}
	m := testManifest(0)
	m.Segments[0].EndOffset = 0 // a one-offset segment
	m.Segments[0].LeaderEpochs = nil
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestManifestValidateRejectsBrokenInvariants(t *testing.T) {
	cases := map[string]func(m *Manifest){
		"version 0":          func(m *Manifest) { m.Version = 0 },
		"version 3":          func(m *Manifest) { m.Version = 3 },
		"meta in version 1":  func(m *Manifest) { m.Version = 1; m.Segments[0].Files.Meta = 100 },
		"empty topic":        func(m *Manifest) { m.Topic = "" },
		"illegal topic":      func(m *Manifest) { m.Topic = "a/b" },
		"nil topic id":       func(m *Manifest) { m.TopicID = uuid.Nil },
		"negative partition": func(m *Manifest) { m.Partition = -1 },
		"negative log start": func(m *Manifest) { m.LogStartOffset = -1 },
		"unsorted":           func(m *Manifest) { m.Segments[0], m.Segments[1] = m.Segments[1], m.Segments[0] },
		"end not rising": func(m *Manifest) {
			m.Segments[1].BaseOffset = m.Segments[0].BaseOffset + 10
			m.Segments[1].EndOffset = m.Segments[0].EndOffset
			m.Segments[1].LeaderEpochs[0].StartOffset = m.Segments[1].BaseOffset
		},
		"inside the previous one": func(m *Manifest) {
			m.Segments[1].BaseOffset = m.Segments[0].BaseOffset + 10
			m.Segments[1].EndOffset = m.Segments[0].EndOffset - 10
			m.Segments[1].LeaderEpochs[0].StartOffset = m.Segments[1].BaseOffset
		},
		"end below base":         func(m *Manifest) { m.Segments[0].EndOffset = m.Segments[0].BaseOffset - 1 },
		"negative base":          func(m *Manifest) { m.Segments[0].BaseOffset = -5 },
		"nil segment id":         func(m *Manifest) { m.Segments[1].SegmentID = uuid.Nil },
		"duplicate segment id":   func(m *Manifest) { m.Segments[1].SegmentID = m.Segments[0].SegmentID },
		"unknown state":          func(m *Manifest) { m.Segments[0].State = "COPIED" },
		"empty state":            func(m *Manifest) { m.Segments[0].State = "" },
		"negative file size":     func(m *Manifest) { m.Segments[0].Files.Index = -1 },
		"size not log size":      func(m *Manifest) { m.Segments[0].SizeBytes++ },
		"epoch before base":      func(m *Manifest) { m.Segments[1].LeaderEpochs[0].StartOffset = m.Segments[1].BaseOffset - 1 },
		"first epoch after base": func(m *Manifest) { m.Segments[1].LeaderEpochs[0].StartOffset++ },
		"epoch past end": func(m *Manifest) {
			s := &m.Segments[0]
			s.LeaderEpochs = append(s.LeaderEpochs, EpochEntry{Epoch: 2, StartOffset: s.EndOffset + 1})
		},
		"epochs not rising": func(m *Manifest) {
			s := &m.Segments[0]
			s.LeaderEpochs = append(s.LeaderEpochs, EpochEntry{Epoch: 1, StartOffset: s.BaseOffset + 5})
		},
		"epoch starts going back": func(m *Manifest) {
			s := &m.Segments[0]
			s.LeaderEpochs = []EpochEntry{{1, s.BaseOffset}, {2, s.BaseOffset + 10}, {3, s.BaseOffset + 5}}
		},
		"negative epoch": func(m *Manifest) { m.Segments[0].LeaderEpochs[0].Epoch = -1 },
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			m := testManifest(0, 100, 200)
			breakIt(&m)
			if err := m.Validate(); !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("Validate = %v, want ErrInvalidManifest", err)
			}
			data, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeManifest(data); !errors.Is(err, ErrCorruptManifest) {
				t.Fatalf("DecodeManifest of an invalid manifest = %v, want ErrCorruptManifest", err)
			}
		})
	}
}

func TestSegmentStateCanMoveToFollowsLifecycle(t *testing.T) {
	states := []SegmentState{StateCopyStarted, StateCopyFinished, StateDeleteStarted, StateDeleteFinished}
	allowed := map[[2]SegmentState]bool{
		{StateCopyStarted, StateCopyStarted}:       true,
		{StateCopyStarted, StateCopyFinished}:      true,
		{StateCopyStarted, StateDeleteStarted}:     true,
		{StateCopyFinished, StateCopyFinished}:     true,
		{StateCopyFinished, StateDeleteStarted}:    true,
		{StateDeleteStarted, StateDeleteStarted}:   true,
		{StateDeleteStarted, StateDeleteFinished}:  true,
		{StateDeleteFinished, StateDeleteFinished}: true,
	}
	for _, from := range states {
		for _, to := range states {
			if got := from.CanMoveTo(to); got != allowed[[2]SegmentState{from, to}] {
				t.Errorf("%s.CanMoveTo(%s) = %v", from, to, got)
			}
		}
	}
	if SegmentState("X").CanMoveTo("X") || StateCopyStarted.CanMoveTo("X") {
		t.Error("an unknown state moved")
	}
}

// The encoding is canonical and stable: it matches the golden file byte
// for byte (regenerate with -rewrite only for a deliberate format change,
// which needs a new version), and decodes back to the same manifest.
func TestManifestEncodeMatchesGoldenAndRoundTrips(t *testing.T) {
	m := testManifest(0, 100)
	m.Segments[1].State = StateCopyStarted
	m.Segments[1].LeaderEpochs = append(m.Segments[1].LeaderEpochs, EpochEntry{Epoch: 4, StartOffset: 150})
	m.Segments[1].Files.Meta = 300 // packed (version 2)
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.Encode()
	if !bytes.Equal(data, again) {
		t.Fatal("two encodings differ")
	}
	golden := filepath.Join("testdata", "manifest-v2.json")
	if rewrite() {
		if err := os.WriteFile(golden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("encoding differs from %s:\n%s", golden, data)
	}
	got, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
}

// A version 1 manifest, as brokers before issue 20 wrote it, still
// decodes, and is rewritten as the current version at its first change.
func TestManifestVersion1StillRead(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "manifest-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || len(m.Segments) != 2 || m.Segments[0].Files.Meta != 0 {
		t.Fatalf("v1 manifest decoded as %+v", m)
	}
	ctx := testCtx(t)
	store := objstore.NewMemStore()
	key := ManifestKey("strata", m.Topic, m.TopicID, m.Partition)
	if _, err := store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	ms := NewManifestStore(store)
	got, _, err := ms.Load(ctx, key)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	seg := testSegment(200, 299)
	seg.Files.Meta = 300
	up, err := ms.Update(ctx, key, addSegment(seg))
	if err != nil {
		t.Fatal(err)
	}
	if up.Version != ManifestVersion || len(up.Segments) != 3 {
		t.Fatalf("updated v1 manifest: %+v", up)
	}
	if got, _, err := ms.Load(ctx, key); err != nil || got.Version != ManifestVersion || len(got.Segments) != 3 {
		t.Fatalf("reloaded: %+v, %v", got, err)
	}
}

func TestManifestEncodeEmptyListsAsArrays(t *testing.T) {
	m := testManifest(0)
	m.Segments[0].LeaderEpochs = nil
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"leaderEpochs": []`)) {
		t.Fatalf("nil leader epochs not encoded as []:\n%s", data)
	}
	empty := testManifest()
	data, _ = empty.Encode()
	if !bytes.Contains(data, []byte(`"segments": []`)) {
		t.Fatalf("nil segments not encoded as []:\n%s", data)
	}
	got, err := DecodeManifest(data)
	if err != nil || got.Segments != nil {
		t.Fatalf("DecodeManifest = %+v, %v; want nil segments", got, err)
	}
}

func TestDecodeManifestRefusesUnknownVersionsAndGarbage(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "manifest-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeManifest(good); err != nil {
		t.Fatalf("golden manifest refused: %v", err)
	}
	s := string(good)
	cases := map[string]string{
		"empty":         "",
		"not json":      "manifest",
		"array":         "[1,2]",
		"null":          "null",
		"no version":    strings.Replace(s, `"version": 1,`, "", 1),
		"version 0":     strings.Replace(s, `"version": 1,`, `"version": 0,`, 1),
		"version 3":     strings.Replace(s, `"version": 1,`, `"version": 3,`, 1),
		"meta in v1":    strings.Replace(s, `"epochs": 24`, `"epochs": 24, "meta": 300`, 1),
		"version str":   strings.Replace(s, `"version": 1,`, `"version": "1",`, 1),
		"unknown field": strings.Replace(s, `"version": 1,`, `"version": 1, "extra": true,`, 1),
		"trailing data": s + "{}",
		"truncated":     s[:len(s)/2],
		"bad uuid":      strings.Replace(s, testTopicID.String(), "not-a-uuid", 1),
		"bad state":     strings.Replace(s, "COPY_FINISHED", "FINISHED", 1),
		"float offset":  strings.Replace(s, `"baseOffset": 100,`, `"baseOffset": 100.5,`, 1),
	}
	for name, data := range cases {
		if data == s {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if m, err := DecodeManifest([]byte(data)); !errors.Is(err, ErrCorruptManifest) {
			t.Errorf("%s: DecodeManifest = %+v, %v; want ErrCorruptManifest", name, m, err)
		}
	}
}

// FuzzDecodeManifest runs its seed corpus (testdata/manifest-*.json and
// testdata/fuzz/FuzzDecodeManifest) in every go test. Invariants: no
// panic; an error wraps ErrCorruptManifest; a manifest that decodes is
// valid, and its canonical encoding decodes to the same manifest and
// re-encodes to the same bytes.
func FuzzDecodeManifest(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "manifest-*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed manifests: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":2,"topic":"t"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptManifest) {
				t.Fatalf("error %v does not wrap ErrCorruptManifest", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded manifest is invalid: %v", err)
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeManifest(enc)
		if err != nil {
			t.Fatalf("canonical encoding refused: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", m2, m)
		}
		enc2, _ := m2.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s", enc, enc2)
		}
	})
}

func TestManifestStoreUpdateCreatesThenWritesConditionally(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	ms := NewManifestStore(mem)
	ms.Now = func() time.Time { return time.UnixMilli(1_000) }
	key := ManifestKey("p", "orders.v2_eu-west", testTopicID, 3)

	if _, _, err := ms.Load(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Load of a missing manifest = %v, want ErrNotFound", err)
	}
	m, err := ms.Update(ctx, key, addSegment(testSegment(0, 99)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != ManifestVersion || len(m.Segments) != 1 || m.UpdatedAt != 1_000 {
		t.Fatalf("first Update wrote %+v", m)
	}
	ms.Now = func() time.Time { return time.UnixMilli(2_000) }
	if _, err := ms.Update(ctx, key, addSegment(testSegment(100, 199))); err != nil {
		t.Fatal(err)
	}
	// The base create-only, then the change as chunk 1, create-only too.
	var modes []objstore.PutMode
	var keys []string
	var etags []string
	for _, c := range mem.Calls() {
		if c.Op == objstore.OpPut {
			modes = append(modes, c.Mode)
			keys = append(keys, c.Key)
		}
	}
	if !reflect.DeepEqual(modes, []objstore.PutMode{objstore.CreateOnly, objstore.CreateOnly}) ||
		!reflect.DeepEqual(keys, []string{key, manifestChunkKey(key, 1)}) {
		t.Fatalf("puts %v %v, want the base then chunk 1, create-only", modes, keys)
	}
	got, etag, err := ms.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := mem.Head(ctx, key)
	etags = append(etags, etag, info.ETag)
	if etags[0] != etags[1] || etag == "" {
		t.Fatalf("Load returned ETag %q, object has %q", etag, info.ETag)
	}
	if len(got.Segments) != 2 || got.Segments[1].BaseOffset != 100 || got.UpdatedAt != 2_000 {
		t.Fatalf("loaded %+v", got)
	}
}

func TestManifestStoreUpdateWithoutChangeDoesNotWrite(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	ms := NewManifestStore(mem)
	key := ManifestKey("", "orders.v2_eu-west", testTopicID, 3)
	seg := testSegment(0, 99)
	if _, err := ms.Update(ctx, key, addSegment(seg)); err != nil {
		t.Fatal(err)
	}
	before, _ := mem.Head(ctx, key)
	mem.ResetCalls()
	m, err := ms.Update(ctx, key, addSegment(seg))
	if err != nil {
		t.Fatal(err)
	}
	if n := mem.CountCalls(objstore.OpPut); n != 0 {
		t.Fatalf("an unchanged manifest was written %d times", n)
	}
	after, _ := mem.Head(ctx, key)
	if before.ETag != after.ETag || len(m.Segments) != 1 {
		t.Fatalf("manifest changed: %s → %s, %d segments", before.ETag, after.ETag, len(m.Segments))
	}
}

func TestManifestStoreUpdateFnErrorOrInvalidResultWritesNothing(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	ms := NewManifestStore(mem)
	key := ManifestKey("", "orders.v2_eu-west", testTopicID, 3)
	boom := errors.New("boom")
	if _, err := ms.Update(ctx, key, func(*Manifest) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	// fn leaves the topic unset: the result is invalid and never written.
	if _, err := ms.Update(ctx, key, func(m *Manifest) error {
		m.Segments = append(m.Segments, testSegment(0, 9))
		return nil
	}); !errors.Is(err, ErrInvalidManifest) {
		t.Fatalf("Update = %v, want ErrInvalidManifest", err)
	}
	if n := mem.CountCalls(objstore.OpPut); n != 0 {
		t.Fatalf("%d puts after failed updates", n)
	}
}

func TestManifestStoreLoadRefusesCorruptObject(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	key := ManifestKey("", "t", testTopicID, 0)
	body := []byte(`{"version": 7}`)
	if _, err := mem.Put(ctx, key, bytes.NewReader(body), int64(len(body)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	ms := NewManifestStore(mem)
	if _, _, err := ms.Load(ctx, key); !errors.Is(err, ErrCorruptManifest) {
		t.Fatalf("Load = %v, want ErrCorruptManifest", err)
	}
	// Update does not paper over a corrupt manifest by rewriting it.
	if _, err := ms.Update(ctx, key, addSegment(testSegment(0, 9))); !errors.Is(err, ErrCorruptManifest) {
		t.Fatalf("Update = %v, want ErrCorruptManifest", err)
	}
}

// Several writers adding different segments at once: every segment ends
// up in the manifest (no lost update), each writer's changes only via
// conditional writes.
func TestManifestStoreConcurrentUpdatersLoseNoUpdate(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	key := ManifestKey("p", "orders.v2_eu-west", testTopicID, 3)
	const writers, each = 6, 8
	updateConcurrently(t, mem, key, writers, each)
	m, _, err := NewManifestStore(mem).Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Segments) != writers*each {
		t.Fatalf("%d segments, want %d: updates were lost", len(m.Segments), writers*each)
	}
	for i, s := range m.Segments {
		if s.BaseOffset != int64(i)*100 {
			t.Fatalf("segment %d at %d", i, s.BaseOffset)
		}
	}
	var failed int
	for _, c := range mem.Calls() {
		if c.Op == objstore.OpPut {
			if c.Mode == objstore.Overwrite {
				t.Fatal("an unconditional put")
			}
			if errors.Is(c.Err, objstore.ErrPreconditionFailed) {
				failed++
			}
		}
	}
	t.Logf("%d conditional puts lost a race", failed)
}

// A Put whose acknowledgement is lost (applied, but reported failed) is
// retried by the retrying store; the retry fails its precondition, the
// next round finds the change made, and the segment is in the manifest
// exactly once with no further write.
func TestManifestStoreLostPutAckAppliedOnce(t *testing.T) {
	for _, exists := range []bool{false, true} {
		t.Run(fmt.Sprintf("exists=%v", exists), func(t *testing.T) {
			ctx := testCtx(t)
			mem := objstore.NewMemStore()
			key := ManifestKey("p", "orders.v2_eu-west", testTopicID, 3)
			if exists {
				if _, err := NewManifestStore(mem).Update(ctx, key, addSegment(testSegment(0, 99))); err != nil {
					t.Fatal(err)
				}
			}
			faults := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpPut, Nth: 1, LostAck: true})
			store := objstore.WithRetry(faults, objstore.RetryPolicy{BaseDelay: time.Millisecond})
			mem.ResetCalls()
			m, err := NewManifestStore(store).Update(ctx, key, addSegment(testSegment(100, 199)))
			if err != nil {
				t.Fatal(err)
			}
			if faults.Fired(0) != 1 {
				t.Fatal("the lost ack was not injected")
			}
			var applied int
			for _, c := range mem.Calls() {
				if c.Op == objstore.OpPut && c.Err == nil {
					applied++
				}
			}
			if applied != 1 {
				t.Fatalf("%d puts applied, want 1", applied)
			}
			stored, _, err := NewManifestStore(mem).Load(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(stored, m) || countBase(stored, 100) != 1 {
				t.Fatalf("stored %+v, Update returned %+v", stored, m)
			}
		})
	}
}

// Without a retrying store the lost ack reaches the caller, whose own
// retry of the same (idempotent) update writes nothing more.
func TestManifestStoreLostPutAckCallerRetryIsIdempotent(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	key := ManifestKey("p", "orders.v2_eu-west", testTopicID, 3)
	faults := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpPut, Nth: 1, LostAck: true})
	ms := NewManifestStore(faults)
	seg := testSegment(0, 99)
	if _, err := ms.Update(ctx, key, addSegment(seg)); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Update = %v, want the injected lost ack", err)
	}
	m, err := ms.Update(ctx, key, addSegment(seg))
	if err != nil {
		t.Fatal(err)
	}
	if countBase(m, 0) != 1 || mem.CountCalls(objstore.OpPut) != 1 {
		t.Fatalf("segment %d times after %d puts", countBase(m, 0), mem.CountCalls(objstore.OpPut))
	}
}

func TestManifestStoreUpdateGivesUpAfterMaxAttempts(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	faults := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpPut, Err: objstore.ErrPreconditionFailed})
	ms := NewManifestStore(faults)
	ms.MaxAttempts = 4
	ms.Backoff = time.Microsecond
	key := ManifestKey("p", "orders.v2_eu-west", testTopicID, 3)
	_, err := ms.Update(ctx, key, addSegment(testSegment(0, 99)))
	if !errors.Is(err, ErrManifestContention) || !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("Update = %v, want ErrManifestContention wrapping ErrPreconditionFailed", err)
	}
	if n := faults.Fired(0); n != 4 {
		t.Fatalf("%d put attempts, want 4", n)
	}
}

func TestManifestStoreUpdateStopsAtDeadline(t *testing.T) {
	mem := objstore.NewMemStore()
	faults := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpPut, Err: objstore.ErrPreconditionFailed})
	ms := NewManifestStore(faults)
	ms.MaxAttempts = 1 << 20
	ms.Backoff = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ms.Update(ctx, ManifestKey("", "orders.v2_eu-west", testTopicID, 3), addSegment(testSegment(0, 9)))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Update took %v past a 50ms deadline", d)
	}
}

// A write landing between Load's Head and Get: the body no longer has
// the ETag read, so Load reads again rather than pair an old ETag with
// new content (or, worse, a new ETag with old content).
func TestManifestStoreLoadRereadsWhenRewrittenBetweenHeadAndGet(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	key := ManifestKey("", "orders.v2_eu-west", testTopicID, 3)
	if _, err := NewManifestStore(mem).Update(ctx, key, addSegment(testSegment(0, 99))); err != nil {
		t.Fatal(err)
	}
	racer := &headHook{ObjectStore: mem}
	racer.hook = func() {
		racer.hook = nil
		// A change and a compaction: the base itself is rewritten.
		other := NewManifestStore(mem)
		if _, err := other.Update(ctx, key, addSegment(testSegment(100, 199))); err != nil {
			t.Error(err)
		}
		if ok, err := other.Compact(ctx, key); !ok || err != nil {
			t.Errorf("Compact = %v, %v", ok, err)
		}
	}
	m, etag, err := NewManifestStore(racer).Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := mem.Head(ctx, key)
	if etag != info.ETag || len(m.Segments) != 2 || racer.heads != 2 {
		t.Fatalf("Load gave %d segments with ETag %s (current %s) after %d heads", len(m.Segments), etag, info.ETag, racer.heads)
	}
}

// headHook runs hook after a Head returns (single goroutine use).
type headHook struct {
	objstore.ObjectStore
	hook  func()
	heads int
}

func (h *headHook) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := h.ObjectStore.Head(ctx, key)
	h.heads++
	if h.hook != nil {
		h.hook()
	}
	return info, err
}

func countBase(m Manifest, base int64) int {
	n := 0
	for _, s := range m.Segments {
		if s.BaseOffset == base {
			n++
		}
	}
	return n
}

// The JSON field names are the bucket format: renaming one breaks restore.
func TestManifestJSONFieldNames(t *testing.T) {
	m := testManifest(0)
	data, _ := m.Encode()
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "topic", "topicId", "partition", "segments", "logStartOffset", "updatedAt"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	seg := raw["segments"].([]any)[0].(map[string]any)
	for _, k := range []string{"segmentId", "baseOffset", "endOffset", "maxTimestamp", "sizeBytes", "leaderEpochs", "state", "files"} {
		if _, ok := seg[k]; !ok {
			t.Errorf("segment field %q missing", k)
		}
	}
	files := seg["files"].(map[string]any)
	for _, ext := range SegmentExts {
		if _, ok := files[ext]; !ok && ext != ExtTxnIndex {
			t.Errorf("files.%s missing", ext)
		}
	}
	// files.txnindex only when the segment has one, so a manifest without
	// aborted transactions stays readable by a broker that predates them
	// (Decode refuses unknown fields).
	if _, ok := files[ExtTxnIndex]; ok {
		t.Errorf("files.txnindex written for a segment without one")
	}
	m.Segments[0].Files.TxnIndex = 34
	data, _ = m.Encode()
	if !strings.Contains(string(data), `"txnindex": 34`) {
		t.Errorf("files.txnindex missing: %s", data)
	}
}

// The same optimistic concurrency on the filesystem backend, whose ETags
// and conditional writes are its own (link/rename publish, MD5 xattrs):
// concurrent writers lose nothing and the manifest's keys are accepted.
func TestManifestStoreOnFSStoreConcurrentUpdatersLoseNoUpdate(t *testing.T) {
	ctx := testCtx(t)
	fs, err := objstore.NewFSStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := ManifestKey("strata", "orders.v2_eu-west", testTopicID, 3)
	const writers, each = 4, 5
	updateConcurrently(t, fs, key, writers, each)
	m, etag, err := NewManifestStore(fs).Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Segments) != writers*each || etag == "" {
		t.Fatalf("%d segments (ETag %q), want %d", len(m.Segments), etag, writers*each)
	}
	objs, err := fs.List(ctx, PartitionPrefix("strata", "orders.v2_eu-west", testTopicID, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, chunk := parseChunkSeq(manifestChunkPrefix(key), o.Key); o.Key != key && !chunk {
			t.Fatalf("partition listing has %s: want only the manifest and its chunks", o.Key)
		}
	}
}

// Every manifest in testdata is valid and in canonical form, so the seed
// corpus exercises the accepting path and documents the format.
func TestManifestTestdataIsCanonical(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "manifest-*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("testdata manifests: %v, %v", files, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeManifest(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, data) {
			t.Fatalf("%s is not canonical; Encode gives:\n%s", file, enc)
		}
	}
}

func TestManifestReadableFindsOnlyCopyFinishedSegments(t *testing.T) {
	m := testManifest(0, 100, 200, 500) // 500..599 after a gap left by deletion
	m.Segments[1].State = StateCopyStarted
	m.Segments[2].State = StateDeleteStarted
	cases := []struct {
		off  int64
		base int64 // -1: none
	}{
		{-1, -1}, {0, 0}, {50, 0}, {99, 0},
		{100, -1}, {150, -1}, // COPY_STARTED: maybe partial
		{250, -1},            // DELETE_STARTED: maybe gone
		{300, -1}, {499, -1}, // gap
		{500, 500}, {599, 500}, {600, -1},
	}
	for _, c := range cases {
		s, ok := m.Readable(c.off)
		if ok != (c.base >= 0) || (ok && s.BaseOffset != c.base) {
			t.Errorf("Readable(%d) = base %d, %v; want base %d", c.off, s.BaseOffset, ok, c.base)
		}
	}
	var empty Manifest
	if _, ok := empty.Readable(0); ok {
		t.Error("an empty manifest found a segment")
	}
}

// After a leader change the new leader may upload a segment straddling
// the old remote end: overlap is valid, and each offset is served by the
// finished segment with the greatest base that contains it.
func TestManifestReadableWithOverlappingSegments(t *testing.T) {
	m := testManifest(0, 100, 300)
	m.Segments[1] = testSegment(50, 249) // straddles [0, 99]'s end
	m.Segments[2].State = StateCopyStarted
	m.Segments = append(m.Segments, testSegment(380, 450))
	if err := m.Validate(); err != nil {
		t.Fatalf("overlapping segments refused: %v", err)
	}
	cases := []struct {
		off  int64
		base int64 // -1: none
	}{
		{0, 0}, {49, 0}, {50, 50}, {99, 50}, {100, 50}, {249, 50},
		{250, -1}, {300, -1}, {379, -1}, // [300,399] is COPY_STARTED
		{380, 380}, {450, 380}, {451, -1},
	}
	for _, c := range cases {
		s, ok := m.Readable(c.off)
		if ok != (c.base >= 0) || (ok && s.BaseOffset != c.base) {
			t.Errorf("Readable(%d) = base %d, %v; want base %d", c.off, s.BaseOffset, ok, c.base)
		}
	}
	// A COPY_STARTED newest segment leaves the older finished one serving.
	m2 := testManifest(0)
	m2.Segments = append(m2.Segments, testSegment(50, 149))
	m2.Segments[1].State = StateCopyStarted
	if s, ok := m2.Readable(60); !ok || s.BaseOffset != 0 {
		t.Errorf("Readable(60) = base %d, %v; want the finished segment at 0", s.BaseOffset, ok)
	}
}

func TestManifestSegmentKeyNamesTheSegmentsFiles(t *testing.T) {
	m := testManifest(0, 100)
	for _, ext := range SegmentExts {
		key := m.SegmentKey("strata", &m.Segments[1], ext)
		info, err := ParseSegmentKey(key)
		if err != nil {
			t.Fatal(err)
		}
		want := SegmentKeyInfo{Prefix: "strata", Topic: m.Topic, TopicID: m.TopicID, Partition: m.Partition,
			BaseOffset: 100, SegmentID: m.Segments[1].SegmentID, Ext: ext}
		if info != want {
			t.Fatalf("key %s parses to %+v, want %+v", key, info, want)
		}
		if _, ok := m.Segments[1].Files.Size(ext); !ok {
			t.Fatalf("FileSizes has no size for %s", ext)
		}
	}
	if _, ok := (FileSizes{}).Size("txt"); ok {
		t.Fatal("FileSizes.Size accepted an unknown extension")
	}
}

// A manifest lives only at its own partition's key: Update refuses to
// write one elsewhere, and Load refuses one found elsewhere (a copy
// gone wrong would otherwise restore another partition's data).
func TestManifestStoreRefusesManifestAtAnotherPartitionsKey(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	ms := NewManifestStore(mem)
	own := ManifestKey("p", "orders.v2_eu-west", testTopicID, 3)
	other := ManifestKey("p", "orders.v2_eu-west", testTopicID, 4)
	if _, err := ms.Update(ctx, other, addSegment(testSegment(0, 99))); !errors.Is(err, ErrInvalidManifest) {
		t.Fatalf("Update at partition 4's key = %v, want ErrInvalidManifest", err)
	}
	if _, err := ms.Update(ctx, "x"+ManifestKey("", "orders.v2_eu-west", testTopicID, 3), addSegment(testSegment(0, 99))); !errors.Is(err, ErrInvalidManifest) {
		t.Fatalf("Update at a key merely ending like ours = %v, want ErrInvalidManifest", err)
	}
	if _, err := ms.Update(ctx, own, addSegment(testSegment(0, 99))); err != nil {
		t.Fatal(err)
	}
	m, _, err := ms.Load(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := m.Encode()
	if _, err := mem.Put(ctx, other, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ms.Load(ctx, other); !errors.Is(err, ErrCorruptManifest) {
		t.Fatalf("Load of a misplaced manifest = %v, want ErrCorruptManifest", err)
	}
}

// updateConcurrently runs writers goroutines, each adding each segments to
// the manifest at key through its own ManifestStore (writer w adds bases
// (i*writers+w)*100, so together they fill 0, 100, 200, ... densely), and
// fails the test on any update error.
func updateConcurrently(t *testing.T, store objstore.ObjectStore, key string, writers, each int) {
	t.Helper()
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			ms := NewManifestStore(store)
			ms.MaxAttempts = 200
			ms.Backoff = 200 * time.Microsecond
			for i := range each {
				base := int64(i*writers+w) * 100
				if _, err := ms.Update(ctx, key, addSegment(testSegment(base, base+99))); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
