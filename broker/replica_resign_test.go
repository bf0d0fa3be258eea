package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ledPartition is a partition this broker (1) leads in epoch 5 with the
// ISR {1, 2, 3} and min ISR 2, both followers at offset 0: nothing it
// appends is committed until they fetch it.
func ledPartition(t *testing.T) *partition {
	t.Helper()
	p := newPartition("resign", uuid.UUID{1}, 0, openTestLog(t, nil, "resign"))
	if _, err := p.loadProducerState(&producerCell{}, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	p.rep = rs([]int32{1, 2, 3}, 2, map[int32]int64{2: 0, 3: 0}, nil)
	p.rep.leaderEpoch = 5
	p.lagMs = 30000
	p.leaderEpoch.Store(5)
	p.leader.Store(true)
	return p
}

// A produce checks the leadership (producePartition's checkLeader), then
// waits for appendMu; reconcile can resign the leadership meanwhile (a
// clean leader bounce: the controller moves it away under load) and
// makeFollower stores the new leader's epoch. The append must then be
// refused: appended, it landed in the follower's log with the new
// leader's epoch, and with no replication state left the HW jumped to
// the log end, so producePartition acknowledged it as acks=all at once.
// The new leader then wrote other records at those offsets: acknowledged
// records lost, offsets reused (seen once in TestFaultLeaderCleanBounce).
func TestAppendAfterResignIsRefusedAndNotAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch []byte
	}{
		{"plain", recordBatch(time.Now().UnixMilli(), "a", "b")},
		{"idempotent", producerBatch(7, 0, 0, "a", "b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ledPartition(t)
			if _, err := p.appendRecords(recordBatch(time.Now().UnixMilli(), "committed?"), 5, time.Now().UnixMilli(), nil); err != nil {
				t.Fatal(err)
			}
			if hw := p.hw.Load(); hw != 0 {
				t.Fatalf("HW %d with both followers at 0", hw)
			}
			epoch := p.leaderEpoch.Load() // what producePartition saw, before appendMu
			p.resignLeadership()
			p.leaderEpoch.Store(6) // makeFollower: the new leader's epoch

			leo := p.log.LogEndOffset()
			res, err := p.appendRecords(tc.batch, epoch, time.Now().UnixMilli(), nil)
			if !errors.Is(err, kerr.NotLeaderForPartition) {
				t.Errorf("append after resigning: %v (offsets %d-%d), want NOT_LEADER_OR_FOLLOWER", err, res.baseOffset, res.lastOffset)
			}
			if got := p.log.LogEndOffset(); got != leo {
				t.Errorf("a leader append reached the follower's log: LEO %d -> %d", leo, got)
			}
			if hw := p.hw.Load(); hw != 0 {
				t.Errorf("HW %d after resigning: records no follower has would be acknowledged (acks=all)", hw)
			}
		})
	}
}

// A new leader's makeLeader and an append in the previous epoch it saw are
// ordered by appendMu: an append checked in epoch 5 is refused once the
// broker leads in epoch 7 (re-elected), so no batch of epoch 5 follows
// the epoch-7 entry of the leader-epoch cache.
func TestAppendInAnOldLeaderEpochIsRefused(t *testing.T) {
	p := ledPartition(t)
	p.leaderEpoch.Store(7)
	if _, err := p.appendRecords(recordBatch(time.Now().UnixMilli(), "x"), 5, time.Now().UnixMilli(), nil); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append checked in epoch 5 while leading 7: %v", err)
	}
	if leo := p.log.LogEndOffset(); leo != 0 {
		t.Fatalf("LEO %d", leo)
	}
}
