package broker

import (
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// partition is the broker's state of one partition it hosts: the log,
// whether this broker leads it and in which leader epoch, the high
// watermark, and the fetches waiting for its next append.
//
// While this broker leads it, the high watermark is the minimum LEO of the
// leader and the maximal ISR (replica_leader.go); consumers never read
// above it.
type partition struct {
	topic   string
	topicID uuid.UUID
	index   int32
	log     *storage.Log

	leader      atomic.Bool
	leaderEpoch atomic.Int32
	hw          atomic.Int64
	tm          *topicMetrics // the topic's counters (metrics.go); nil-safe

	// appendMu serialises leader appends (appendRecords), so the offset the
	// producer state records for a batch is the one the log assigns.
	appendMu sync.Mutex
	prod     *producerCell    // idempotent-producer state; set by loadProducerState before publishing
	verified txnVerifications // KIP-890 verification guards (txn_produce.go)

	mu      sync.Mutex // guards waiters
	waiters map[*waiter]struct{}

	// Replication, leader side (replica_leader.go).
	repMu sync.Mutex // guards rep
	rep   *replState // nil unless this broker leads the partition
	// followerHWKnown: as a follower, the high watermark came from the
	// current leader epoch's leader (consumers may read it, KIP-392).
	followerHWKnown atomic.Bool
	// Replication throttles (replica_throttle.go), from the image:
	// this broker's replica is named by the topic's leader / follower
	// throttled-replicas list; followerInISR: it is in the ISR.
	leaderThrottled, followerThrottled, followerInISR atomic.Bool
	lagMs                                             int64      // replica.lag.time.max.ms, set by makeLeader
	hwMu                                              sync.Mutex // guards hwWait
	hwWait                                            hwWaiters  // acks=all and waitHW callers, by offset
	expiryOnce                                        sync.Once  // starts the isr-expiration task
	dropped                                           chan struct{}
	dropOnce                                          sync.Once
}

// waiter is one long-polling fetch: a buffered channel that appends to any
// of its partitions signal.
type waiter struct{ c chan struct{} }

func newWaiter() *waiter { return &waiter{c: make(chan struct{}, 1)} }

func newPartition(topic string, id uuid.UUID, index int32, l *storage.Log) *partition {
	p := &partition{topic: topic, topicID: id, index: index, log: l, waiters: map[*waiter]struct{}{}, dropped: make(chan struct{})}
	// The checkpointed HW (replication-offset-checkpoint, kept within the
	// log by storage); makeLeader raises it to the log end for a single
	// replica.
	p.hw.Store(min(l.HighWatermark(), l.LogEndOffset()))
	return p
}

// checkLeaderAppendLocked (appendMu held) refuses a leader append unless
// this broker still leads p in epoch, the leader epoch the caller checked
// before waiting for appendMu: a produce that passed checkLeader can reach
// the log after reconcile resigned the leadership (resignLeadership and
// makeLeader change it under appendMu). Appended anyway, its batch would
// land in a follower's log (stamped with the new leader's epoch once
// makeFollower ran, so no epoch truncation finds it), and with no
// replication state the HW would jump to the log end and acknowledge it
// as acks=all: records only this broker has, lost when the new leader
// writes other records at their offsets.
func (p *partition) checkLeaderAppendLocked(epoch int32) error {
	if !p.leader.Load() || p.leaderEpoch.Load() != epoch {
		return kerr.NotLeaderForPartition
	}
	return nil
}

// checkLeader returns NOT_LEADER_OR_FOLLOWER unless this broker leads the
// partition, and the leader-epoch errors of KIP-320 for a client that knows
// another epoch (-1: the client does not say).
func (p *partition) checkLeader(clientEpoch int32) error {
	if !p.leader.Load() {
		return kerr.NotLeaderForPartition
	}
	if clientEpoch >= 0 {
		switch e := p.leaderEpoch.Load(); {
		case clientEpoch < e:
			return kerr.FencedLeaderEpoch
		case clientEpoch > e:
			return kerr.UnknownLeaderEpoch
		}
	}
	return nil
}

// append appends a produce request's records as leader in leader epoch
// epoch, raises the high watermark and wakes the waiting fetches. Client
// produces go through appendRecords (idempotence.go), which checks the
// leadership and calls it under appendMu.
func (p *partition) append(records []byte, epoch int32) (storage.AppendInfo, error) {
	info, err := p.log.Append(records, storage.AppendOptions{LeaderEpoch: epoch, AssignOffsets: true})
	if err != nil {
		return info, err
	}
	p.afterLeaderAppend()
	p.tm.appended(info)
	return info, nil
}

// raiseHW moves the high watermark up (never down), records it for the
// replication-offset-checkpoint, completes the acks=all and waitHW waiters
// it passes and wakes the parked fetches (followers learn the new HW at
// once, not one replica.fetch.wait.max.ms later).
func (p *partition) raiseHW(to int64) {
	for {
		cur := p.hw.Load()
		if to <= cur {
			return
		}
		if p.hw.CompareAndSwap(cur, to) {
			break
		}
	}
	p.log.SetHighWatermark(p.hw.Load())
	p.completeHWWaiters()
	p.wake()
}

// markDropped stops the partition's background tasks (isr-expiration).
func (p *partition) markDropped() { p.dropOnce.Do(func() { close(p.dropped) }) }

// wake signals every waiting fetch.
func (p *partition) wake() {
	p.mu.Lock()
	for w := range p.waiters {
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

func (p *partition) addWaiter(w *waiter) {
	p.mu.Lock()
	p.waiters[w] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) removeWaiter(w *waiter) {
	p.mu.Lock()
	delete(p.waiters, w)
	p.mu.Unlock()
}

// encodeTopicID spells a topic id as partition.metadata does.
func encodeTopicID(id uuid.UUID) string { return storage.EncodeTopicID(id) }

// readPartitionMetadata returns the topic id a log directory was created
// for; ok is false when the file is missing. storage owns the file
// (storage.ReadPartitionMetadata); the broker decides what it must say.
func readPartitionMetadata(fs vfs.FS, dir string) (uuid.UUID, bool, error) {
	return storage.ReadPartitionMetadata(fs, dir)
}

// writePartitionMetadata records the topic id of a log directory,
// durably (storage.WritePartitionMetadata: tmp, fsync, rename, directory
// fsync).
func writePartitionMetadata(fs vfs.FS, dir string, id uuid.UUID) error {
	return storage.WritePartitionMetadata(fs, dir, id)
}
