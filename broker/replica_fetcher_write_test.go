package broker

import (
	"testing"
	"time"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// TestFetcherOneWritePerResponse: a fetch response carrying a partition's
// eight batches reaches the follower's segment file in one write (issue
// 20: one sendfile on the leader, one write on the follower), counted by
// an errfs rule on the follower's log that injects nothing.
func TestFetcherOneWritePerResponse(t *testing.T) {
	h := newFetcherHarness(t)
	var bs [][]byte
	for i := range 8 {
		bs = append(bs, recordBatch(int64(i+1), vals("w", 4)...))
	}
	h.leader.appendAs("w", 0, bs...)
	writes := errfs.On(errfs.OpWrite, errfs.OpWriteAt).Glob("*.log")
	p := h.follower("w", errfs.Wrap(vfs.Default, writes))
	h.follow(p, 0)
	h.waitIdentical(p)
	if got := writes.Matched(); got != 1 {
		t.Fatalf("%d writes to the follower's segment for one response of 8 batches, want 1", got)
	}
	if h.leader.fetchCount() < 1 || p.log.LogEndOffset() != 32 {
		t.Fatalf("follower at %d after %d fetches, want 32", p.log.LogEndOffset(), h.leader.fetchCount())
	}
	// The next response, two batches more: one write more.
	h.leader.appendAs("w", 0, recordBatch(9, "x"), recordBatch(10, "y"))
	h.waitIdentical(p)
	if got := writes.Matched(); got != 2 {
		t.Fatalf("%d writes after a second response, want 2", got)
	}
}

// TestFollowerFetchIsSentWithSendfile: the leader answers a follower's
// fetch the way it answers a consumer's, the records sent from the segment
// file with sendfile(2) (sentfileBytes counts them), never copied through
// the heap: issue 20's one sendfile on the leader per fetched partition.
func TestFollowerFetchIsSentWithSendfile(t *testing.T) {
	c := handCluster(t, nil)
	leader, fs, ep := replTopic(t, c, "zc", []int32{1, 2}, nil)
	p := leader.partition("zc", 0)
	rc := dialRaw(t, leader)
	val := string(make([]byte, 16<<10))
	for range 16 { // 256 KiB, well past coalesceMax (frames copied whole)
		req := produceReq(9, "zc", [16]byte{}, 0, 1, recordBatch(time.Now().UnixMilli(), val))
		if code, _ := produceErr(t, rc.roundTrip(req)); code != 0 {
			t.Fatalf("produce: %v", code)
		}
	}
	size := p.log.Size()
	before := sentfileBytes.Load()
	got := replicaFetch(t, rc, leader, fs[0], ep[fs[0]], "zc", 0, -1)
	sent := sentfileBytes.Load() - before
	if int64(len(got.RecordBatches)) != size || sent != size {
		t.Fatalf("follower fetch: %d record bytes of the log's %d, %d of them with sendfile", len(got.RecordBatches), size, sent)
	}
	// At the LEO the follower moves the HW there: a consumer reads it all,
	// through the same path.
	replicaFetch(t, rc, leader, fs[0], ep[fs[0]], "zc", p.log.LogEndOffset(), -1)
	before = sentfileBytes.Load()
	cgot := fetchPart0(t, rc.roundTrip(fetchReq(12, "zc", [16]byte{}, 0, 0, 0, 1, 1<<20)))
	if sent := sentfileBytes.Load() - before; int64(len(cgot.RecordBatches)) != size || sent != size {
		t.Fatalf("consumer fetch: %d record bytes of %d, %d with sendfile", len(cgot.RecordBatches), size, sent)
	}
}
