package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

func TestCleanerShrinksToOneRecordPerKey(t *testing.T) {
	e := newCompactEnv(t, nil)
	const keys, rounds = 20, 30
	offsetOf := map[string]int64{} // value -> offset assigned at append
	for r := range rounds {
		var ops []op
		for k := range keys {
			ops = append(ops, op{key: fmt.Sprintf("k%02d", k), value: fmt.Sprintf("r%02d-k%02d", r, k)})
		}
		for i := 0; i < len(ops); i += 5 {
			first := e.put(ops[i:i+5], batch.CodecNone, nil)
			for j := range 5 {
				offsetOf[ops[i+j].value] = first + int64(j)
			}
		}
	}
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	before, leo := e.log.Size(), e.log.LogEndOffset()
	res := e.cleanNow(0)
	if res.groups == 0 || res.firstDirty != leo {
		t.Fatalf("cleaning: %+v, want groups and first dirty %d", res, leo)
	}
	recs := readRecords(t, e.log)
	if len(recs) != keys {
		t.Fatalf("%d records after cleaning, want %d", len(recs), keys)
	}
	for _, r := range recs {
		if !strings.HasPrefix(r.value, fmt.Sprintf("r%02d-", rounds-1)) {
			t.Fatalf("kept %q, not the newest value of %s", r.value, r.key)
		}
		if offsetOf[r.value] != r.offset {
			t.Fatalf("%q at offset %d, appended at %d", r.value, r.offset, offsetOf[r.value])
		}
	}
	if after := e.log.Size(); after*5 > before {
		t.Fatalf("log %d bytes after cleaning, %d before", after, before)
	}
	if e.log.LogEndOffset() != leo {
		t.Fatalf("LEO %d, want %d", e.log.LogEndOffset(), leo)
	}
	checkSegmentsContiguous(t, e.log)
	checkIndexAgainstScan(t, e.log)
	// Every offset in a gap reads as the next batch holding a kept record.
	for off := int64(0); off < leo; off += 7 {
		v, err := e.log.Read(off, 1, leo)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if v.Size == 0 || v.NextOffset <= off {
			t.Fatalf("Read(%d) gave %+v", off, v)
		}
		v.Release()
	}
	want := latest(recs)
	// Clean reopen, then a full rescan (recovery validates compacted
	// batches with CheckStored).
	sameMap(t, "clean reopen", latest(readRecords(t, e.reopen())), want)
	e.log.Close()
	l := e.open(false, 0, 0)
	if l.Recovery().TruncatedBytes != 0 {
		t.Fatalf("recovery truncated %d bytes of compacted data", l.Recovery().TruncatedBytes)
	}
	sameMap(t, "rescanned", latest(readRecords(t, l)), want)
	checkIndexAgainstScan(t, l)
}

func TestCleanerDropsTombstonesAfterDeleteRetention(t *testing.T) {
	e := newCompactEnv(t, nil)
	for k := range 10 {
		e.put([]op{{key: fmt.Sprintf("k%d", k), value: "v"}}, batch.CodecNone, nil)
	}
	for k := range 5 {
		e.put([]op{{key: fmt.Sprintf("k%d", k), del: true}}, batch.CodecNone, nil)
	}
	e.log.Roll()
	res := e.cleanNow(0)
	tombstones := func() int {
		n := 0
		for _, r := range readRecords(t, e.log) {
			if r.del {
				n++
			}
		}
		return n
	}
	if n := tombstones(); n != 5 {
		t.Fatalf("%d tombstones right after cleaning, want 5 (delete.retention.ms not passed)", n)
	}
	if n := len(readRecords(t, e.log)); n != 10 {
		t.Fatalf("%d records, want 5 values + 5 tombstones", n)
	}
	// Past delete.retention.ms, the next cleaning drops them.
	e.clock.Advance(2 * time.Hour)
	e.put([]op{{key: "other", value: "v"}}, batch.CodecNone, nil)
	e.log.Roll()
	e.cleanNow(res.firstDirty)
	if n := tombstones(); n != 0 {
		t.Fatalf("%d tombstones after delete.retention.ms, want 0", n)
	}
	got := latest(readRecords(t, e.log))
	if len(got) != 6 || got["k7"] != "v" || got["other"] != "v" {
		t.Fatalf("after dropping tombstones: %v", got)
	}
}

func TestCleanerMatchesModelOnRandomWorkloads(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			e := newCompactEnv(t, nil, func(c *Config) {
				c.SegmentBytes = 1024 + int64(rng.IntN(4096))
				c.DeleteRetentionMs = int64(rng.IntN(3000))
			})
			model := map[string]string{}
			fd := int64(0)
			for round := range 4 {
				randomWorkload(e, rng, 30+rng.IntN(50), 25, model)
				if rng.IntN(3) > 0 {
					fd = e.cleanNow(fd).firstDirty
				}
				sameMap(t, fmt.Sprintf("round %d", round), latest(readRecords(t, e.log)), model)
				checkSegmentsContiguous(t, e.log)
			}
			e.log.Roll()
			e.cleanNow(fd)
			recs := readRecords(t, e.log)
			sameMap(t, "final", latest(recs), model)
			// Fully cleaned: at most one live record per key, plus
			// tombstones younger than delete.retention.ms.
			seen := map[string]bool{}
			for _, r := range recs {
				if seen[r.key] {
					t.Fatalf("key %s appears twice after a full cleaning", r.key)
				}
				seen[r.key] = true
			}
			checkIndexAgainstScan(t, e.log)
			e.log.Close()
			sameMap(t, "rescanned", latest(readRecords(t, e.open(false, 0, 0))), model)
		})
	}
}

func TestCleanerRetainsIdempotentProducersLastBatch(t *testing.T) {
	e := newCompactEnv(t, nil)
	p := &producerIDs{id: 7, epoch: 3}
	e.put([]op{{key: "a", value: "1"}, {key: "b", value: "1"}}, batch.CodecNone, p)
	e.put([]op{{key: "a", value: "2"}, {key: "b", value: "2"}, {key: "c", value: "2"}}, batch.CodecZstd, p)
	e.put([]op{{key: "a", value: "3"}, {key: "b", value: "3"}, {key: "c", value: "3"}}, batch.CodecNone, nil)
	e.put([]op{{key: "z", value: "3"}}, batch.CodecNone, nil)
	e.log.Roll()
	e.cleanNow(0)
	hdrs := scanBatches(t, e.log)
	var kept []batch.Header
	for _, h := range hdrs {
		if h.ProducerID == 7 {
			kept = append(kept, h)
		}
	}
	// The first batch of producer 7 goes; its last one stays, empty, with
	// the sequence range the broker rebuilds producer state from.
	if len(kept) != 1 || kept[0].NumRecords != 0 || kept[0].BaseOffset != 2 || kept[0].BaseSequence != 2 ||
		kept[0].LastOffsetDelta != 2 || kept[0].ProducerEpoch != 3 {
		t.Fatalf("producer 7 batches after cleaning: %+v", kept)
	}
	sameMap(t, "values", latest(readRecords(t, e.log)), map[string]string{"a": "3", "b": "3", "c": "3", "z": "3"})
}

func TestCleanerNeverTouchesActiveOrYoungSegments(t *testing.T) {
	e := newCompactEnv(t, nil, func(c *Config) { c.MinCompactionLagMs = time.Minute.Milliseconds() })
	for r := range 20 {
		e.put([]op{{key: "a", value: fmt.Sprint(r)}, {key: "b", value: fmt.Sprint(r)}}, batch.CodecNone, nil)
	}
	e.log.Roll()
	// Records are seconds old: below min.compaction.lag.ms, nothing moves.
	if res := e.cleanNow(0); res.groups != 0 || res.firstDirty != 0 {
		t.Fatalf("cleaned young segments: %+v", res)
	}
	e.clock.Advance(2 * time.Minute)
	for r := range 5 {
		e.put([]op{{key: "a", value: fmt.Sprint("new", r)}}, batch.CodecNone, nil)
	}
	act := e.log.active()
	actSize := act.size.Load()
	res := e.cleanNow(0)
	if res.groups == 0 {
		t.Fatal("old segments not cleaned")
	}
	if e.log.active() != act || act.size.Load() != actSize {
		t.Fatal("the active segment changed")
	}
	recs := readRecords(t, e.log)
	// Two from the cleaned section (a and b) + the 5 in the active segment.
	if len(recs) != 7 {
		t.Fatalf("%d records, want 7: %+v", len(recs), recs)
	}
}

func TestCleanerReadViewOfReplacedSegmentStaysReadable(t *testing.T) {
	e := newCompactEnv(t, nil, func(c *Config) { c.FileDeleteDelayMs = 0 })
	for r := range 40 {
		e.put([]op{{key: "a", value: fmt.Sprint(r)}}, batch.CodecNone, nil)
	}
	e.log.Roll()
	v, err := e.log.Read(0, 1<<20, e.log.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := v.Bytes()
	e.cleanNow(0)
	got, err := v.Bytes()
	v.Release()
	if err != nil || string(got) != string(want) {
		t.Fatalf("view of a replaced segment changed: err %v, %d vs %d bytes", err, len(got), len(want))
	}
	if n := len(readRecords(t, e.log)); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
}

func TestAppendRejectsKeylessRecordOnCompactedLog(t *testing.T) {
	e := newCompactEnv(t, nil)
	b := makeBatch(t, 1, 10, baseTs)
	// makeBatch keys every record: build one without.
	h, _ := batch.ParseHeader(b)
	bl := batch.NewBuilder(h)
	bl.Add(batch.Record{KeyNull: true, Value: []byte("v")})
	nb, _ := bl.AppendTo(nil)
	_, err := e.log.Append(nb, AppendOptions{AssignOffsets: true})
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted log: %v, want INVALID_RECORD", err)
	}
	e.log.SetConfig(func() Config { c := e.cfg; c.CleanupPolicy = "delete"; return c }())
	if _, err := e.log.Append(nb, AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatalf("keyless record on a delete log: %v", err)
	}
}

func TestRetentionOnlyWithDeletePolicy(t *testing.T) {
	for _, policy := range []string{"compact", "compact,delete", "delete"} {
		t.Run(policy, func(t *testing.T) {
			e := newCompactEnv(t, nil, func(c *Config) { c.CleanupPolicy = policy; c.RetentionMs = time.Hour.Milliseconds() })
			for r := range 20 {
				e.put([]op{{key: fmt.Sprint("k", r), value: "v"}}, batch.CodecNone, nil)
			}
			e.log.Roll()
			e.clock.Advance(2 * time.Hour)
			n, err := e.log.EnforceRetention(e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if deletes := policy != "compact"; (n > 0) != deletes {
				t.Fatalf("policy %q: retention deleted %d segments", policy, n)
			}
		})
	}
}

// swapWorkload fills a compacted log on fs with a deterministic workload
// and returns the model; the log is left open with everything rolled and
// flushed.
func swapWorkload(t *testing.T, fs vfs.FS) (*testEnv, map[string]string) {
	e := newCompactEnv(t, fs, func(c *Config) { c.SegmentBytes = 1500 })
	model := map[string]string{}
	randomWorkload(e, rand.New(rand.NewPCG(5, 5)), 60, 12, model)
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	// Durable too: a roll's fsyncs come after it (rollsync.go).
	if err := e.log.Flush(); err != nil {
		t.Fatal(err)
	}
	return e, model
}

// noLeftovers fails if a cleaning left .cleaned or .swap files.
func noLeftovers(t *testing.T, fs vfs.FS, dir, label string) {
	names, _ := fs.List(dir)
	for _, n := range names {
		if strings.HasSuffix(n, CleanedFileSuffix) || strings.HasSuffix(n, SwapFileSuffix) {
			t.Fatalf("%s: leftover %s", label, n)
		}
	}
}

func TestCleanerCrashAtEverySyncKeepsNewestValues(t *testing.T) {
	mem := vfs.NewMem()
	e, model := swapWorkload(t, mem)
	type point struct {
		fs *vfs.MemFS
		ev vfs.SyncEvent
	}
	var points []point
	mem.SetSyncHook(func(ev vfs.SyncEvent) { points = append(points, point{mem.CrashClone(0, nil), ev}) })
	res := e.cleanNow(0)
	mem.SetSyncHook(nil)
	if res.groups < 2 {
		t.Fatalf("only %d groups cleaned: the sweep covers too little", res.groups)
	}
	points = append(points, point{mem.CrashClone(0, nil), vfs.SyncEvent{Path: "(after cleaning)"}})
	rp := e.log.RecoveryPoint()
	for _, i := range sample(len(points), 30) {
		p := points[i]
		label := fmt.Sprintf("crash at sync %d (%s)", p.ev.N, filepath.Base(p.ev.Path))
		for _, rescan := range []bool{false, true} {
			c := p.fs.Clone()
			o := e.options(false, rp, 0)
			o.FS = c
			if rescan {
				o.RecoveryPoint = 0
			}
			l, err := OpenLog(o)
			if err != nil {
				t.Fatalf("%s: reopen: %v", label, err)
			}
			sameMap(t, label, latest(readRecords(t, l)), model)
			checkSegmentsContiguous(t, l)
			noLeftovers(t, c, e.dir, label)
			l.Close()
		}
	}
	t.Logf("%d crash points, 30 sampled", len(points))
}

func TestCleanerFailedRenameOrSyncLeavesReadableLog(t *testing.T) {
	ops := []errfs.Op{errfs.OpRename, errfs.OpSync, errfs.OpSyncDir}
	// Count the renames and syncs of the workload and of one cleaning.
	count := errfs.On(ops...)
	e, _ := swapWorkload(t, errfs.Wrap(vfs.NewMem(), count))
	base := count.Matched()
	e.cleanNow(0)
	total := count.Matched() - base
	if total < 10 {
		t.Fatalf("only %d renames and syncs counted", total)
	}
	for _, i := range sample(total, 16) {
		n := i + 1
		mem := vfs.NewMem()
		rule := errfs.On(ops...).Err(syscall.EIO)
		rule.Disable()
		e, model := swapWorkload(t, errfs.Wrap(mem, rule))
		if rule.Matched() != base {
			t.Fatalf("workload not deterministic: %d calls, then %d", base, rule.Matched())
		}
		rule.Nth(base + n)
		rule.Enable()
		_, err := e.log.clean(cleanParams{firstDirty: 0, now: e.clock.Now(), dedupeBytes: 1 << 20})
		if err == nil {
			t.Fatalf("fault %d of %d: cleaning succeeded", n, total)
		}
		label := fmt.Sprintf("fault %d of %d (%v)", n, total, err)
		// What a reader sees right after the failure is still right.
		sameMap(t, label+" live", latest(readRecords(t, e.log)), model)
		e.log.Close()
		rule.Disable()
		o := e.options(false, 0, 0)
		o.FS = mem
		l, err := OpenLog(o)
		if err != nil {
			t.Fatalf("%s: reopen: %v", label, err)
		}
		sameMap(t, label, latest(readRecords(t, l)), model)
		checkSegmentsContiguous(t, l)
		noLeftovers(t, mem, e.dir, label)
		l.Close()
	}
}

func TestCleanerThrottleHoldsRate(t *testing.T) {
	e := newCompactEnv(t, nil, func(c *Config) { c.SegmentBytes = 16 << 10 })
	for r := range 300 {
		e.put([]op{{key: fmt.Sprint("k", r%10), value: strings.Repeat("v", 400)}}, batch.CodecNone, nil)
	}
	e.log.Roll()
	const rate = 400 << 10 // bytes/s
	start := time.Now()
	res, err := e.log.clean(cleanParams{now: e.clock.Now(), dedupeBytes: 1 << 20, throttle: newThrottler(rate)})
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	total := float64(res.bytesRead + res.bytesWritten)
	got := total / elapsed.Seconds()
	t.Logf("%.0f bytes in %v: %.0f B/s (limit %d)", total, elapsed, got, rate)
	if got > rate*1.3 {
		t.Fatalf("cleaner I/O at %.0f B/s above the %d B/s limit", got, rate)
	}
	if total < rate/4 {
		t.Fatalf("only %.0f bytes moved: the test measures nothing", total)
	}
}

func TestManagerCleanerCleansCompactedLogsAndCheckpoints(t *testing.T) {
	mem := vfs.NewMem()
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.FileDeleteDelayMs = 0
	compact := cfg
	compact.CleanupPolicy = "compact"
	open := func() *Manager {
		m, err := OpenManager(ManagerOptions{Dir: "/data", FS: mem, Default: cfg, Now: clock.Now,
			TopicConfig: func(topic string) (Config, bool) { return compact, topic == "c" }})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	lc, _ := m.GetOrCreate("c", 0, compact)
	ld, _ := m.GetOrCreate("d", 0, cfg)
	for r := range 50 {
		for _, l := range []*Log{lc, ld} {
			b := keyedBatch(t, []op{{key: "a", value: fmt.Sprint(r)}, {key: "b", value: fmt.Sprint(r)}}, clock.Now().UnixMilli(), batch.CodecNone, nil)
			if _, err := l.Append(b, AppendOptions{AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
			l.SetHighWatermark(l.LogEndOffset()) // the cleaner stops at it
		}
	}
	lc.Roll()
	ld.Roll()
	dSize := ld.Size()
	if n := m.RunCleaner(); n != 1 {
		t.Fatalf("RunCleaner ran %d cleanings, want 1", n)
	}
	if ld.Size() != dSize {
		t.Fatal("a delete-policy log was compacted")
	}
	if n := len(readRecords(t, lc)); n != 2 {
		t.Fatalf("%d records in the compacted log, want 2", n)
	}
	st := m.CleanerStats()
	if st.Runs != 1 || st.BytesRead == 0 || st.BytesWritten == 0 || len(st.Logs) != 1 ||
		st.Logs[0].FirstDirtyOffset != lc.LogEndOffset() || st.Logs[0].DirtyRatio != 0 {
		t.Fatalf("stats %+v", st)
	}
	if n := m.RunCleaner(); n != 0 {
		t.Fatalf("a clean log cleaned again (%d)", n)
	}
	leo := lc.LogEndOffset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = open()
	defer m.Close()
	if st := m.CleanerStats(); len(st.Logs) != 1 || st.Logs[0].FirstDirtyOffset != leo {
		t.Fatalf("after reopen the checkpointed first dirty offset is lost: %+v", st)
	}
}

func TestCleanerConcurrentWithAppendsRollsAndReads(t *testing.T) {
	e := newCompactEnv(t, nil)
	model := map[string]string{}
	stop := make(chan struct{})
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the cleaner
		defer wg.Done()
		fd := int64(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := e.log.clean(cleanParams{firstDirty: fd, now: e.clock.Now(), dedupeBytes: 1 << 20, stop: stop})
			if err != nil && !errors.Is(err, errCleanAborted) {
				errc <- err
				return
			}
			if err == nil {
				fd = res.firstDirty
			}
		}
	}()
	go func() { // a reader walking the log from its start again and again
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			prev := int64(-1)
			for off := e.log.LocalLogStartOffset(); off < e.log.LogEndOffset(); {
				v, err := e.log.Read(off, 8<<10, e.log.LogEndOffset())
				if err != nil {
					errc <- fmt.Errorf("Read(%d): %w", off, err)
					return
				}
				b, err := v.Bytes()
				v.Release()
				if err != nil {
					errc <- err
					return
				}
				for rest := b; len(rest) > 0; {
					first, r, err := batch.Split(rest)
					if err != nil {
						errc <- fmt.Errorf("view at %d: %w", off, err)
						return
					}
					h, err := batch.CheckStored(first)
					if err != nil || h.BaseOffset <= prev {
						errc <- fmt.Errorf("batch %d after %d: %v", h.BaseOffset, prev, err)
						return
					}
					prev = h.LastOffset()
					rest = r
				}
				if v.Size == 0 {
					break
				}
				off = v.NextOffset
			}
		}
	}()
	rng := rand.New(rand.NewPCG(11, 12))
	for range 15 {
		randomWorkload(e, rng, 20, 15, model)
		select {
		case err := <-errc:
			t.Fatal(err)
		default:
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	e.log.Roll()
	e.cleanNow(0)
	sameMap(t, "after concurrent cleaning", latest(readRecords(t, e.log)), model)
	checkSegmentsContiguous(t, e.log)
	checkIndexAgainstScan(t, e.log)
}

func TestManagerCleanerThreadsCleanInBackgroundUnlessDisabled(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprint("disabled=", disabled), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 2048
			cfg.FileDeleteDelayMs = 0
			cfg.CleanupPolicy = "compact,delete"
			m, err := OpenManager(ManagerOptions{Dir: "/data", FS: vfs.NewMem(), Default: cfg,
				CleanerBackoff: 5 * time.Millisecond, CleanerThreads: 2, DisableCleaner: disabled})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			m.Start()
			l, _ := m.GetOrCreate("c", 0, cfg)
			for r := range 60 {
				b := keyedBatch(t, []op{{key: "a", value: fmt.Sprint(r)}}, time.Now().UnixMilli(), batch.CodecNone, nil)
				if _, err := l.Append(b, AppendOptions{AssignOffsets: true}); err != nil {
					t.Fatal(err)
				}
			}
			l.SetHighWatermark(l.LogEndOffset()) // the cleaner stops at it
			l.Roll()
			wait := 5 * time.Second
			if disabled {
				wait = 300 * time.Millisecond // 60 backoffs: an enabled cleaner ran long before
			}
			testutil.Within(wait, func() bool { return m.CleanerStats().Runs > 0 }) // asserted just below
			if got := m.CleanerStats().Runs > 0; got == disabled {
				t.Fatalf("cleaner ran: %v, disabled: %v", got, disabled)
			}
			if !disabled {
				// Cleanings may have started before the last roll: wait for
				// the threads to catch up with everything sealed.
				if err := testutil.Within(5*time.Second, func() error {
					if n := len(readRecords(t, l)); n != 1 {
						return fmt.Errorf("%d records after background cleaning, want 1", n)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestManagerCleanerExpiresTombstonesWithoutNewDirtyData(t *testing.T) {
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.FileDeleteDelayMs = 0
	cfg.CleanupPolicy = "compact"
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	m, err := OpenManager(ManagerOptions{Dir: "/data", FS: vfs.NewMem(), Default: cfg, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.GetOrCreate("c", 0, cfg)
	for r := range 40 {
		o := op{key: fmt.Sprint("k", r%8), value: "v"}
		if r >= 32 && r%2 == 0 {
			o = op{key: o.key, del: true}
		}
		if _, err := l.Append(keyedBatch(t, []op{o}, clock.Now().UnixMilli(), batch.CodecNone, nil), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset()) // the cleaner stops at it
	l.Roll()
	tombstones := func() (n int) {
		for _, r := range readRecords(t, l) {
			if r.del {
				n++
			}
		}
		return n
	}
	if n := m.RunCleaner(); n != 1 || tombstones() != 4 {
		t.Fatalf("first cleaning: %d runs, %d tombstones (want 1, 4)", n, tombstones())
	}
	if n := m.RunCleaner(); n != 0 {
		t.Fatalf("cleaned again before any tombstone expired (%d)", n)
	}
	clock.Advance(2 * time.Hour)
	if n := m.RunCleaner(); n != 1 || tombstones() != 0 {
		t.Fatalf("after delete.retention.ms: %d runs, %d tombstones (want 1, 0)", n, tombstones())
	}
	if n := m.RunCleaner(); n != 0 {
		t.Fatalf("cleaned again with nothing to do (%d)", n)
	}
	if got := latest(readRecords(t, l)); len(got) != 4 {
		t.Fatalf("live keys %v, want the 4 never deleted", got)
	}
}
