package share

import (
	"fmt"
	"testing"
)

// TestEightConsumersOneKilled is the core's part of issue 19's 8-consumer
// scenario: 8 consumers share one partition of 4000 records fetched in
// batches of 10, each takes at most 50 records per fetch; consumer 3 is
// killed (stops acknowledging) holding a batch. Every record is processed
// once, except the dead consumer's, which go to the others after the lock
// duration with delivery count 2; every consumer got a share of the load.
func TestEightConsumersOneKilled(t *testing.T) {
	cfg := DefaultConfig()
	p := New(cfg, 0)
	const total = 4000
	members := make([]string, 8)
	for i := range members {
		members[i] = fmt.Sprintf("c%d", i)
	}
	processed := make(map[int64]string)
	perMember := map[string]int{}
	var killedHeld []AcquiredRecords
	redelivered := 0
	now := int64(0)
	for round := 0; p.StartOffset() < total; round++ {
		if round > 10000 {
			t.Fatalf("stuck at SPSO %d", p.StartOffset())
		}
		now += 10
		for _, m := range members {
			from := p.NextFetchOffset()
			var batches []Batch
			for o := from - from%10; o < min(from+50, total); o += 10 {
				batches = append(batches, Batch{First: o, Last: o + 9})
			}
			got := p.Acquire(m, batches, 50, BatchOptimized, now)
			if m == "c3" && round == 2 && len(got) > 0 {
				killedHeld = got // killed mid-batch: never acknowledges
				members = append(members[:3], members[4:]...)
				break
			}
			var acks []AckBatch
			for _, a := range got {
				for o := a.First; o <= a.Last; o++ {
					if prev, ok := processed[o]; ok {
						t.Fatalf("offset %d processed by %s and %s", o, prev, m)
					}
					processed[o] = m
					if a.DeliveryCount > 1 {
						redelivered++
					}
				}
				perMember[m] += int(a.Last - a.First + 1)
				acks = append(acks, AckBatch{First: a.First, Last: a.Last, Types: []AckType{AckAccept}})
			}
			if err := p.Acknowledge(m, acks, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(processed) != total {
		t.Fatalf("processed %d of %d", len(processed), total)
	}
	held := 0
	for _, a := range killedHeld {
		held += int(a.Last - a.First + 1)
		for o := a.First; o <= a.Last; o++ {
			if processed[o] == "c3" {
				t.Fatalf("offset %d credited to the killed consumer", o)
			}
		}
	}
	if held == 0 || redelivered != held {
		t.Fatalf("killed consumer held %d records, %d redelivered", held, redelivered)
	}
	if now < cfg.LockDurationMs {
		t.Fatalf("finished at %d ms, before the lock duration: the dead consumer's records were not waited for", now)
	}
	for _, m := range []string{"c0", "c1", "c2", "c4", "c5", "c6", "c7"} {
		if perMember[m] < total/8/2 {
			t.Errorf("%s processed only %d records: %v", m, perMember[m], perMember)
		}
	}
	t.Logf("per consumer %v, %d redelivered at %d ms", perMember, redelivered, now)
}

// TestGapJumpBounded: a compacted log's gap of 2^20 offsets costs nothing
// when nothing is in flight, and a wide gap behind in-flight records is not
// spelled out (the window, not the offsets, bounds memory).
func TestGapJumpBounded(t *testing.T) {
	p := New(DefaultConfig(), 0)
	got := p.Acquire("a", []Batch{{First: 1 << 20, Last: 1<<20 + 1}}, 10, BatchOptimized, 0)
	if len(got) != 1 || got[0].First != 1<<20 || p.StartOffset() != 1<<20 || cap(p.recs) > 64 {
		t.Fatalf("acquired %v, SPSO %d, window capacity %d", got, p.StartOffset(), cap(p.recs))
	}
	got = p.Acquire("b", []Batch{{First: 1 << 21, Last: 1 << 21}}, 10, BatchOptimized, 0)
	if len(got) != 0 || p.InFlight() != 2 || cap(p.recs) > 64 {
		t.Fatalf("acquired %v past a wide gap; %d in flight, capacity %d", got, p.InFlight(), cap(p.recs))
	}
}
