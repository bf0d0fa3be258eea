package share

import (
	"container/heap"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordState is the delivery state of one in-flight record, with Kafka's
// ids (RecordState.java; the same ids __share_group_state stores).
type RecordState int8

// The record states. Acknowledged and Archived are terminal.
const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	Archived     RecordState = 4
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", int8(s))
}

func (s RecordState) terminal() bool { return s == Acknowledged || s == Archived }

// AckType is one acknowledgement type of ShareFetch/ShareAcknowledge
// (AcknowledgeTypes: 0 gap, 1 accept, 2 release, 3 reject; 4 renew, KIP-1222,
// v2 with IsRenewAck).
type AckType int8

// The acknowledgement types.
const (
	AckGap     AckType = 0
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4
)

// AcquireMode is ShareFetch v2's ShareAcquireMode (KIP-1206).
type AcquireMode int8

// The acquire modes.
const (
	// BatchOptimized acquires whole log batches: MaxRecords and
	// MaxRecordLocks are checked only between batches, so one batch may
	// overshoot them (Kafka's default, "aligned to batch boundaries").
	BatchOptimized AcquireMode = 0
	// RecordLimit never acquires more than MaxRecords records, splitting a
	// log batch if needed.
	RecordLimit AcquireMode = 1
)

// Config holds the share-group settings one share-partition uses, with
// Kafka's names and defaults (GroupConfig / ShareGroupConfig).
type Config struct {
	// LockDurationMs is group.share.record.lock.duration.ms (30000): how
	// long an acquired record stays with its consumer before it is
	// released by itself.
	LockDurationMs int64
	// DeliveryCountLimit is group.share.delivery.count.limit (5): a record
	// delivered that many times is archived instead of made available.
	DeliveryCountLimit int16
	// MaxRecordLocks is group.share.partition.max.record.locks (2000): the
	// in-flight window (SPSO..SPEO) is not extended with new records past
	// it, which bounds the records acquired at once.
	MaxRecordLocks int
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{LockDurationMs: 30000, DeliveryCountLimit: 5, MaxRecordLocks: 2000}
}

// Batch is the offsets of one log batch a fetch returned, inclusive.
type Batch struct{ First, Last int64 }

// AcquiredRecords is one run of records handed to a consumer, as ShareFetch
// answers it (kmsg.ShareFetchResponseTopicPartitionAcquiredRecord).
type AcquiredRecords struct {
	First, Last   int64
	DeliveryCount int16
}

// AckBatch is one acknowledgement batch of a ShareFetch/ShareAcknowledge:
// Types has one entry for the whole range or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// maxOvershoot bounds how far one log batch may extend the window past
// MaxRecordLocks in batch-optimized mode (a corrupt or huge batch must not
// make the window unbounded).
const maxOvershoot = 1 << 16

type record struct {
	state    RecordState
	count    int16  // delivery count
	member   string // holder, while Acquired
	deadline int64  // lock deadline (ms), while Acquired
}

// lock is one acquisition lock in the expiry heap. It is checked lazily:
// when it comes due it expires only the records still acquired by member
// with exactly this deadline (a renew or a release leaves it stale).
type lock struct {
	deadline    int64
	first, last int64
	member      string
}

type lockHeap []lock

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h lockHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lockHeap) Push(x any)        { *h = append(*h, x.(lock)) }
func (h *lockHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Partition is the state of one share-partition on its leader: Kafka's
// SharePartition without the I/O. Offsets below Start (the SPSO) are done;
// records[i] is offset Start+i, up to the end of the in-flight window; the
// log beyond it has not been delivered yet. Every mutating method takes the
// current time in milliseconds and first expires the locks that are due,
// so the caller's clock drives lock expiry; the readers (State,
// NextFetchOffset, ...) report the state as of the last call. Not safe for
// concurrent use.
type Partition struct {
	cfg      Config
	start    int64
	recs     []record
	acquired int
	locks    lockHeap

	dirty          bool
	dirtyLo        int64 // offsets changed since TakeUpdate, inclusive
	dirtyHi        int64
	startDirty     bool
	deliveredTotal int64 // records handed out (deliveries), for metrics
	archivedTotal  int64 // records archived unaccepted (rejected or at the limit), for metrics
}

// New returns an empty share-partition whose SPSO is start (see
// [AutoOffsetReset.StartOffset] for the initial one).
func New(cfg Config, start int64) *Partition {
	if cfg.LockDurationMs <= 0 {
		cfg.LockDurationMs = DefaultConfig().LockDurationMs
	}
	if cfg.DeliveryCountLimit <= 0 {
		cfg.DeliveryCountLimit = DefaultConfig().DeliveryCountLimit
	}
	if cfg.MaxRecordLocks <= 0 {
		cfg.MaxRecordLocks = DefaultConfig().MaxRecordLocks
	}
	return &Partition{cfg: cfg, start: start}
}

// Config returns the partition's settings.
func (p *Partition) Config() Config { return p.cfg }

// StartOffset is the share-partition start offset (SPSO): every offset
// below it is acknowledged or archived.
func (p *Partition) StartOffset() int64 { return p.start }

// EndOffset is the share-partition end offset (SPEO) as Kafka reports it:
// the last offset of the in-flight window, or StartOffset when the window
// is empty.
func (p *Partition) EndOffset() int64 {
	if len(p.recs) == 0 {
		return p.start
	}
	return p.next() - 1
}

func (p *Partition) next() int64 { return p.start + int64(len(p.recs)) }

// InFlight is the number of records in the window (SPSO..SPEO).
func (p *Partition) InFlight() int { return len(p.recs) }

// AcquiredCount is the number of records currently acquired.
func (p *Partition) AcquiredCount() int { return p.acquired }

// Holds reports whether member holds (has acquired) a record of the
// window, as of the last call.
func (p *Partition) Holds(member string) bool {
	if p.acquired == 0 {
		return false
	}
	for i := range p.recs {
		if p.recs[i].state == Acquired && p.recs[i].member == member {
			return true
		}
	}
	return false
}

// Deliveries is the number of record deliveries (acquisitions) so far.
func (p *Partition) Deliveries() int64 { return p.deliveredTotal }

// Archived is the number of records archived without being accepted so
// far: rejected, or released or expired at the delivery count limit
// (offsets archived as gaps of the log are not records and not counted).
func (p *Partition) Archived() int64 { return p.archivedTotal }

// State returns the state, delivery count and holder of offset o; an
// offset below the SPSO is reported Acknowledged or Archived as "done"
// (Archived) since the window no longer knows which, and one past the
// window Available with count 0.
func (p *Partition) State(o int64) (RecordState, int16, string) {
	if o < p.start {
		return Archived, 0, ""
	}
	if o >= p.next() {
		return Available, 0, ""
	}
	r := p.recs[o-p.start]
	return r.state, r.count, r.member
}

// NextFetchOffset is where the next fetch of the log should start: the
// first available record of the window, else the end of the window.
func (p *Partition) NextFetchOffset() int64 {
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.start + int64(i)
		}
	}
	return p.next()
}

// CanAcquire reports whether an acquisition could return anything without
// a new fetch being pointless: there is an available record in the window,
// or the window has room for new records (Kafka's canAcquireRecords).
func (p *Partition) CanAcquire(now int64) bool {
	p.Expire(now)
	return p.NextFetchOffset() < p.next() || len(p.recs) < p.cfg.MaxRecordLocks
}

func (p *Partition) markDirty(o int64) {
	if !p.dirty {
		p.dirty, p.dirtyLo, p.dirtyHi = true, o, o
		return
	}
	if o < p.dirtyLo {
		p.dirtyLo = o
	}
	if o > p.dirtyHi {
		p.dirtyHi = o
	}
}

// Acquire hands records of the fetched log batches to member: available
// records of the window, then new records past it, up to maxRecords (see
// [AcquireMode]) and the window bound MaxRecordLocks. Offsets between
// batches past the window (removed by compaction, or control records the
// fetch skipped) are archived with delivery count 0, never delivered. A
// record already delivered DeliveryCountLimit times (possible after a
// restart) is archived instead of acquired. When nothing is in flight the
// SPSO jumps over a gap; a gap wider than MaxRecordLocks after in-flight
// records stops the acquisition until the window drains. batches must be the log as
// read from [Partition.NextFetchOffset] (or earlier), in order: an offset
// missing between two batches is taken as absent from the log. The result is coalesced runs
// with equal delivery counts, in offset order.
func (p *Partition) Acquire(member string, batches []Batch, maxRecords int, mode AcquireMode, now int64) []AcquiredRecords {
	p.Expire(now)
	if maxRecords <= 0 {
		return nil
	}
	var out []AcquiredRecords
	n := 0
	deadline := now + p.cfg.LockDurationMs
	emit := func(o int64, count int16) {
		if k := len(out) - 1; k >= 0 && out[k].Last == o-1 && out[k].DeliveryCount == count {
			out[k].Last = o
		} else {
			out = append(out, AcquiredRecords{First: o, Last: o, DeliveryCount: count})
		}
	}
	for _, b := range batches {
		if b.Last < b.First || b.Last < p.start {
			continue
		}
		if n >= maxRecords {
			break
		}
		first := max(b.First, p.start)
		if first >= p.next() {
			if len(p.recs) >= p.cfg.MaxRecordLocks {
				break
			}
			if first > p.next() && len(p.recs) == 0 {
				// Nothing in flight: the SPSO jumps over the gap.
				p.start, p.startDirty = first, true
			} else if first-p.next() > int64(p.cfg.MaxRecordLocks) {
				// A gap wider than the window bound is not spelled out
				// offset by offset: wait until the window drains, then jump.
				break
			}
		}
		for o := first; o <= b.Last; o++ {
			if mode == RecordLimit && n >= maxRecords {
				break
			}
			if o >= p.next() {
				if len(p.recs) >= p.cfg.MaxRecordLocks && (mode == RecordLimit || len(p.recs) >= p.cfg.MaxRecordLocks+maxOvershoot) {
					break
				}
				// Archive the gap before a batch that starts past the window.
				for g := p.next(); g < o; g++ {
					p.recs = append(p.recs, record{state: Archived})
					p.markDirty(g)
				}
				p.recs = append(p.recs, record{state: Available})
			}
			r := &p.recs[o-p.start]
			if r.state != Available {
				continue
			}
			p.markDirty(o)
			if r.count >= p.cfg.DeliveryCountLimit {
				r.state = Archived
				p.archivedTotal++
				continue
			}
			r.state, r.member, r.deadline = Acquired, member, deadline
			r.count++
			p.acquired++
			p.deliveredTotal++
			n++
			emit(o, r.count)
		}
	}
	for _, a := range out {
		heap.Push(&p.locks, lock{deadline: deadline, first: a.First, last: a.Last, member: member})
	}
	p.advance()
	return out
}

// Acknowledge applies member's acknowledgements. It is all or nothing: it
// returns kerr.InvalidRequest for malformed batches (reversed range, types
// count neither 1 nor the range length, unknown type, batches not
// ascending and disjoint) and kerr.InvalidRecordState when an offset is not
// a record currently acquired by member (already acknowledged, below the
// SPSO, never delivered, lock expired, or held by another member), and
// then changes nothing. Accept acknowledges, reject and gap archive,
// release makes the record available again (archived if it reached the
// delivery count limit), renew extends the lock by the lock duration.
func (p *Partition) Acknowledge(member string, acks []AckBatch, now int64) error {
	p.Expire(now)
	prev := int64(-1)
	for i, a := range acks {
		if a.Last < a.First || (i > 0 && a.First <= prev) {
			return kerr.InvalidRequest
		}
		prev = a.Last
		if len(a.Types) != 1 && int64(len(a.Types)) != a.Last-a.First+1 {
			return kerr.InvalidRequest
		}
		for _, t := range a.Types {
			if t < AckGap || t > AckRenew {
				return kerr.InvalidRequest
			}
		}
		if a.First < p.start || a.Last >= p.next() {
			return kerr.InvalidRecordState
		}
		for o := a.First; o <= a.Last; o++ {
			r := &p.recs[o-p.start]
			if r.state != Acquired || r.member != member {
				return kerr.InvalidRecordState
			}
		}
	}
	deadline := now + p.cfg.LockDurationMs
	for _, a := range acks {
		renewFrom := int64(-1)
		for o := a.First; o <= a.Last; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			r := &p.recs[o-p.start]
			if t == AckRenew {
				r.deadline = deadline
				if renewFrom < 0 {
					renewFrom = o
				}
				continue
			}
			if renewFrom >= 0 {
				heap.Push(&p.locks, lock{deadline: deadline, first: renewFrom, last: o - 1, member: member})
				renewFrom = -1
			}
			switch t {
			case AckAccept:
				p.settle(o, r, Acknowledged)
			case AckReject, AckGap:
				p.settle(o, r, Archived)
			case AckRelease:
				p.release(o, r)
			}
		}
		if renewFrom >= 0 {
			heap.Push(&p.locks, lock{deadline: deadline, first: renewFrom, last: a.Last, member: member})
		}
	}
	p.advance()
	return nil
}

func (p *Partition) settle(o int64, r *record, s RecordState) {
	if s == Archived {
		p.archivedTotal++
	}
	r.state, r.member, r.deadline = s, "", 0
	p.acquired--
	p.markDirty(o)
}

// release makes an acquired record available again, or archives it when
// its delivery count reached the limit (Kafka's InFlightState).
func (p *Partition) release(o int64, r *record) {
	if r.count >= p.cfg.DeliveryCountLimit {
		p.settle(o, r, Archived)
		return
	}
	p.settle(o, r, Available)
}

// ReleaseMember releases every record member holds (its share session
// closed or it left the group), as a release acknowledgement would.
func (p *Partition) ReleaseMember(member string, now int64) int {
	p.Expire(now)
	n := 0
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.member == member {
			p.release(p.start+int64(i), r)
			n++
		}
	}
	p.advance()
	return n
}

// Expire releases the records whose acquisition lock is due at now
// (deadline <= now) and returns how many it released.
func (p *Partition) Expire(now int64) int {
	n := 0
	for len(p.locks) > 0 && p.locks[0].deadline <= now {
		l := heap.Pop(&p.locks).(lock)
		for o := max(l.first, p.start); o <= l.last && o < p.next(); o++ {
			r := &p.recs[o-p.start]
			if r.state == Acquired && r.member == l.member && r.deadline == l.deadline {
				p.release(o, r)
				n++
			}
		}
	}
	if n > 0 {
		p.advance()
	}
	return n
}

// NextDeadline is the earliest pending lock deadline (ms), or -1: the
// shell's timer fires Expire then.
func (p *Partition) NextDeadline() int64 {
	if len(p.locks) == 0 {
		return -1
	}
	return p.locks[0].deadline
}

// AdvanceStart moves the SPSO up to logStart when the log's start moved
// past it (retention, DeleteRecords, or an AlterShareGroupOffsets reset):
// the records below are archived and dropped; locks on them vanish.
func (p *Partition) AdvanceStart(logStart, now int64) {
	p.Expire(now)
	if logStart <= p.start {
		return
	}
	k := min(int64(len(p.recs)), logStart-p.start)
	for i := int64(0); i < k; i++ {
		if p.recs[i].state == Acquired {
			p.acquired--
		}
	}
	p.recs = p.recs[k:]
	p.start = logStart
	p.startDirty = true
	if len(p.recs) == 0 {
		p.recs = nil
	}
	p.advance()
}

// advance moves the SPSO past the terminal records at the head of the
// window.
func (p *Partition) advance() {
	k := 0
	for k < len(p.recs) && p.recs[k].state.terminal() {
		k++
	}
	if k == 0 {
		return
	}
	p.start += int64(k)
	p.startDirty = true
	if k == len(p.recs) {
		p.recs = nil
	} else {
		p.recs = p.recs[k:]
	}
	if p.dirty && p.dirtyHi < p.start {
		p.dirty = false
	}
}

// Validate checks the settings against Kafka's bounds (ShareGroupConfig /
// GroupConfig): lock duration 1000..3600000 ms, delivery count limit
// 2..10, record locks 100..10000. The config layer answers an error as
// INVALID_CONFIG; New itself accepts any positive value (tests use small
// ones).
func (c Config) Validate() error {
	switch {
	case c.LockDurationMs < 1000 || c.LockDurationMs > 3600000:
		return fmt.Errorf("group.share.record.lock.duration.ms %d not in [1000, 3600000]", c.LockDurationMs)
	case c.DeliveryCountLimit < 2 || c.DeliveryCountLimit > 10:
		return fmt.Errorf("group.share.delivery.count.limit %d not in [2, 10]", c.DeliveryCountLimit)
	case c.MaxRecordLocks < 100 || c.MaxRecordLocks > 10000:
		return fmt.Errorf("group.share.partition.max.record.locks %d not in [100, 10000]", c.MaxRecordLocks)
	}
	return nil
}
