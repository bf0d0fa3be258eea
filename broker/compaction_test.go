package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A compacted topic end to end through franz-go: keyed updates and
// tombstones produced with kgo's defaults (idempotent, snappy), the
// segments cleaned, and a consumer from offset 0 sees exactly the newest
// value of every key, across the offset gaps and the empty batches the
// cleaner leaves; keyless records are refused.
func TestCompactedTopicConsumerSeesNewestValuePerKey(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"log.cleaner.backoff.ms": "3600000"})
	adm := newAdmin(t, n)
	str := func(s string) *string { return &s }
	createTopic(t, adm, "kv", 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.bytes": str("4096"), "min.cleanable.dirty.ratio": str("0.01"),
	})
	cl := newClient(t, n, kgo.ProducerLinger(0))
	ctx := testCtx(t)
	model := map[string]string{}
	const produced = 600
	for i := range produced {
		k := fmt.Sprintf("k%02d", i%25)
		r := &kgo.Record{Topic: "kv", Key: []byte(k)}
		if i%50 == 49 {
			delete(model, k) // a tombstone
		} else {
			r.Value = fmt.Appendf(nil, "v%d", i)
			model[k] = string(r.Value)
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kv", Value: []byte("no key")}).FirstErr(); err == nil {
		t.Fatal("a keyless record was accepted on a compacted topic")
	}
	l, ok := n.store.Get("kv", 0)
	if !ok {
		t.Fatal("no log for kv-0")
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	before := l.Size()
	if runs := n.store.RunCleaner(); runs == 0 {
		t.Fatal("the cleaner did not run")
	}
	if l.Size()*3 > before {
		t.Fatalf("log %d bytes after cleaning, %d before", l.Size(), before)
	}

	cons := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kv": {0: kgo.NewOffset().AtStart()}}))
	got := map[string]string{}
	seen, last := 0, int64(-1)
	for last < produced-1 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed up to offset %d of %d: %v", last, produced-1, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			seen++
			if r.Value == nil {
				delete(got, string(r.Key))
			} else {
				got[string(r.Key)] = string(r.Value)
			}
		})
	}
	if len(got) != len(model) {
		t.Fatalf("%d keys consumed, want %d", len(got), len(model))
	}
	for k, v := range model {
		if got[k] != v {
			t.Fatalf("key %s: consumed %q, newest produced %q", k, got[k], v)
		}
	}
	if seen >= produced/3 {
		t.Fatalf("consumed %d records of %d produced: not compacted", seen, produced)
	}
	s := scrapeMetrics(t, n)
	if s.get(t, "strata_log_cleaner_runs_total") < 1 || s.get(t, "strata_log_cleaner_written_bytes_total") <= 0 ||
		s.get(t, "strata_log_cleaner_read_bytes_total") < float64(before) {
		t.Fatal("log cleaner counters did not move")
	}
	if r := s.get(t, "strata_log_cleaner_dirty_ratio", "topic", "kv", "partition", "0"); r != 0 {
		t.Fatalf("dirty ratio %v right after a full cleaning", r)
	}

	// The cleaned log survives a restart, and a new consumer reads the
	// same newest values.
	dir := n.cfg.LogDir
	n.Close()
	n = startNode(t, dir, map[string]string{"log.cleaner.backoff.ms": "3600000"})
	cons = newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kv": {0: kgo.NewOffset().AtStart()}}))
	ctx = testCtx(t)
	again := map[string]string{}
	for last = -1; last < produced-1; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after restart consumed up to offset %d of %d: %v", last, produced-1, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch after restart: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			last = r.Offset
			if r.Value == nil {
				delete(again, string(r.Key))
			} else {
				again[string(r.Key)] = string(r.Value)
			}
		})
	}
	if fmt.Sprint(again) != fmt.Sprint(model) {
		t.Fatalf("after restart: %v, want %v", again, model)
	}
}
