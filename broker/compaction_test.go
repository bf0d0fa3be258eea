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
	if st := n.store.CleanerStats(); st.Runs == 0 || st.BytesWritten == 0 {
		t.Fatalf("cleaner stats %+v", st)
	}
}
