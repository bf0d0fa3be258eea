package share

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// mrec is the model's view of one log offset.
type mrec struct {
	absent   bool // not in the log (a gap between batches)
	state    RecordState
	count    int16
	member   string
	deadline int64
}

// model is a deliberately naive share-partition: a flat array over the
// whole log, no window, no heap, no coalescing.
type model struct {
	cfg  Config
	recs []mrec
}

func (m *model) expire(now int64) {
	for i := range m.recs {
		r := &m.recs[i]
		if r.state == Acquired && r.deadline <= now {
			m.release(r)
		}
	}
}

func (m *model) release(r *mrec) {
	r.member, r.deadline = "", 0
	if r.count >= m.cfg.DeliveryCountLimit {
		r.state = Archived
	} else {
		r.state = Available
	}
}

func (m *model) crash() {
	for i := range m.recs {
		if r := &m.recs[i]; r.state == Acquired {
			r.state, r.member, r.deadline = Available, "", 0
		}
	}
}

func (m *model) done(o int) bool {
	r := m.recs[o]
	return r.absent || r.state.terminal()
}

type propRun struct {
	t        *testing.T
	rng      *rand.Rand
	cfg      Config
	log      []Batch
	p        *Partition
	m        *model
	j        *Journal
	stateLog []LogRecord // the encoded __share_group_state records written, pruned at restarts
	key      Key
	now      int64
	spso     int64
	maxBatch int64
	maxGap   int64
	ops      []string
}

func (r *propRun) fatalf(format string, args ...any) {
	r.t.Helper()
	tail := r.ops
	if len(tail) > 15 {
		tail = tail[len(tail)-15:]
	}
	r.t.Fatalf("%s\nlast ops:\n%s\nstate: %s", fmt.Sprintf(format, args...), strings.Join(tail, "\n"), fmtPartition(r.p))
}

// fetch is the log read from the partition's next fetch offset: up to n
// batches, the first one the batch holding (or following) that offset.
func (r *propRun) fetch(n int) []Batch {
	from := r.p.NextFetchOffset()
	var out []Batch
	for _, b := range r.log {
		if b.Last < from {
			continue
		}
		out = append(out, b)
		if len(out) == n {
			break
		}
	}
	return out
}

func (r *propRun) persist() {
	u, ok := r.p.TakeUpdate()
	if !ok {
		return
	}
	rec, err := r.j.Write(r.key, 0, 1, u, r.now)
	if err != nil {
		r.fatalf("journal write: %v", err)
	}
	r.logState(rec)
	st, _ := r.j.State(r.key)
	live := r.p.Snapshot()
	if st.StartOffset != live.StartOffset || !reflect.DeepEqual(st.Batches, live.Batches) {
		r.fatalf("durable state %d %s != live %d %s", st.StartOffset, fmtBatches(st.Batches), live.StartOffset, fmtBatches(live.Batches))
	}
}

// logState appends rec to the state log at the next offset and tells the
// journal where it landed.
func (r *propRun) logState(rec Record) {
	off := int64(0)
	if n := len(r.stateLog); n > 0 {
		off = r.stateLog[n-1].Offset + 1
	}
	k, v := EncodeRecord(rec)
	r.stateLog = append(r.stateLog, LogRecord{Offset: off, Key: k, Value: v})
	r.j.Placed([]Record{rec}, off)
}

// restart prunes the state log to the journal's last redundant offset, as
// the coordinator does, and replays what is left.
func (r *propRun) restart() {
	if off, ok := r.j.LastRedundantOffset(); ok {
		i := 0
		for i < len(r.stateLog) && r.stateLog[i].Offset < off {
			i++
		}
		r.stateLog = r.stateLog[i:]
	}
	j, err := Replay(r.stateLog)
	if err != nil {
		r.fatalf("replay: %v", err)
	}
	st, ok := j.State(r.key)
	if !ok {
		r.fatalf("replay lost the key")
	}
	if want, _ := r.j.State(r.key); !reflect.DeepEqual(st, want) {
		r.fatalf("replayed state %+v != journal state %+v", st, want)
	}
	r.j = j
	if r.p, err = Restore(r.cfg, st); err != nil {
		r.fatalf("restore: %v", err)
	}
	r.m.crash()
}

// check compares the partition with the model and the invariants.
func (r *propRun) check() {
	p, m := r.p, r.m
	if p.StartOffset() < r.spso {
		r.fatalf("SPSO went back from %d to %d", r.spso, p.StartOffset())
	}
	r.spso = p.StartOffset()
	// The window is only extended while under max.record.locks, by one
	// batch and the gap before it (Kafka counts gaps in the window too),
	// a gap no wider than max.record.locks.
	bound := p.Config().MaxRecordLocks - 1 + min(int(r.maxGap), p.Config().MaxRecordLocks) + int(r.maxBatch)
	if p.InFlight() > bound {
		r.fatalf("window %d records > max.record.locks %d + a gap and a batch", p.InFlight(), p.Config().MaxRecordLocks)
	}
	acquired := 0
	for o := range m.recs {
		mr := &m.recs[o]
		s, c, holder := p.State(int64(o))
		if c > r.cfg.DeliveryCountLimit || mr.count > r.cfg.DeliveryCountLimit {
			r.fatalf("offset %d delivery count %d/%d over the limit %d", o, c, mr.count, r.cfg.DeliveryCountLimit)
		}
		if !mr.absent && mr.state == Available && mr.count >= r.cfg.DeliveryCountLimit && s == Archived &&
			(c == mr.count || int64(o) < p.StartOffset()) {
			mr.state = Archived // archived at its next acquisition (after a restart)
		}
		if int64(o) < p.StartOffset() {
			if !m.done(o) {
				r.fatalf("offset %d below SPSO %d but model has it %s", o, p.StartOffset(), mr.state)
			}
			continue
		}
		if mr.absent {
			if !(s == Archived && c == 0) && !(s == Available && c == 0 && int64(o) >= p.next()) {
				r.fatalf("gap offset %d is %s/%d", o, s, c)
			}
			continue
		}
		if s != mr.state || c != mr.count || holder != mr.member {
			r.fatalf("offset %d: partition %s/%d@%q, model %s/%d@%q", o, s, c, holder, mr.state, mr.count, mr.member)
		}
		if s == Acquired {
			acquired++
		}
	}
	if acquired != p.AcquiredCount() {
		r.fatalf("AcquiredCount %d, model %d", p.AcquiredCount(), acquired)
	}
}

func (r *propRun) acquire(member string) {
	mode := AcquireMode(r.rng.Intn(2))
	max := 1 + r.rng.Intn(8)
	got := r.p.Acquire(member, r.fetch(1+r.rng.Intn(3)), max, mode, r.now)
	r.ops = append(r.ops, fmt.Sprintf("t=%d acquire %s max=%d mode=%d -> %s", r.now, member, max, mode, fmtAcquired(got)))
	r.m.expire(r.now)
	n := 0
	prev := int64(-1)
	for _, a := range got {
		if a.First <= prev || a.Last < a.First {
			r.fatalf("acquired runs not ascending: %v", got)
		}
		prev = a.Last
		for o := a.First; o <= a.Last; o++ {
			if o >= int64(len(r.m.recs)) {
				r.fatalf("acquired %d past the log", o)
			}
			mr := &r.m.recs[o]
			if mr.absent || mr.state != Available {
				r.fatalf("acquired offset %d that the model has %s (held by %q; absent %v)", o, mr.state, mr.member, mr.absent)
			}
			if mr.count+1 != a.DeliveryCount {
				r.fatalf("offset %d delivery count %d, model %d+1", o, a.DeliveryCount, mr.count)
			}
			mr.state, mr.member, mr.count, mr.deadline = Acquired, member, mr.count+1, r.now+r.cfg.LockDurationMs
			n++
		}
	}
	if mode == RecordLimit && n > max {
		r.fatalf("record-limit mode acquired %d > %d", n, max)
	}
}

func (r *propRun) ack(member string) {
	r.m.expire(r.now)
	var held []int64
	for o, mr := range r.m.recs {
		if mr.state == Acquired && mr.member == member {
			held = append(held, int64(o))
		}
	}
	types := []AckType{AckAccept, AckAccept, AckAccept, AckRelease, AckReject, AckRenew, AckGap}
	var acks []AckBatch
	bad := r.rng.Intn(8) == 0 || len(held) == 0
	if bad {
		o := r.rng.Int63n(int64(len(r.m.recs)))
		acks = []AckBatch{{First: o, Last: o, Types: []AckType{AckAccept}}}
		mr := r.m.recs[o]
		bad = !(mr.state == Acquired && mr.member == member)
	} else {
		// Runs of consecutive held offsets, each with one type or one per offset.
		for i := 0; i < len(held); {
			j := i
			for j+1 < len(held) && held[j+1] == held[j]+1 && r.rng.Intn(4) != 0 {
				j++
			}
			if r.rng.Intn(3) != 0 {
				a := AckBatch{First: held[i], Last: held[j]}
				if r.rng.Intn(2) == 0 {
					a.Types = []AckType{types[r.rng.Intn(len(types))]}
				} else {
					for k := i; k <= j; k++ {
						a.Types = append(a.Types, types[r.rng.Intn(len(types))])
					}
				}
				acks = append(acks, a)
			}
			i = j + 1
		}
	}
	err := r.p.Acknowledge(member, acks, r.now)
	r.ops = append(r.ops, fmt.Sprintf("t=%d ack %s %v -> %v", r.now, member, acks, err))
	if bad {
		if !errors.Is(err, kerr.InvalidRecordState) {
			r.fatalf("bad ack: err = %v, want INVALID_RECORD_STATE", err)
		}
		return
	}
	if err != nil {
		r.fatalf("ack of held records: %v", err)
	}
	for _, a := range acks {
		for o := a.First; o <= a.Last; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			mr := &r.m.recs[o]
			switch t {
			case AckAccept:
				mr.state, mr.member, mr.deadline = Acknowledged, "", 0
			case AckReject, AckGap:
				mr.state, mr.member, mr.deadline = Archived, "", 0
			case AckRelease:
				r.m.release(mr)
			case AckRenew:
				mr.deadline = r.now + r.cfg.LockDurationMs
			}
		}
	}
}

const maxGap = 3

// randomLog is batches over [0, n) with occasional gaps (compacted
// offsets) between them; the last offset is always a record.
func randomLog(rng *rand.Rand, n int64) (log []Batch, recs []mrec, maxBatch, maxGapSeen int64) {
	recs = make([]mrec, n)
	for o := int64(0); o < n; {
		if o > 0 && rng.Intn(5) == 0 {
			gap := min(1+rng.Int63n(maxGap), n-1-o)
			if rng.Intn(10) == 0 {
				gap = min(20+rng.Int63n(20), n-1-o) // wider than max.record.locks
			}
			maxGapSeen = max(maxGapSeen, gap)
			for g := o; g < o+gap; g++ {
				recs[g].absent = true
			}
			o += gap
		}
		size := min(1+rng.Int63n(6), n-o)
		log = append(log, Batch{First: o, Last: o + size - 1})
		maxBatch = max(maxBatch, size)
		o += size
	}
	return log, recs, maxBatch, maxGapSeen
}

// TestSharePartitionModel is the property test of issue 19: random
// acquire, accept, release, reject, renew, lock expiry, member release, log
// start moves and crash+restart (through the encoded __share_group_state records) against
// a naive model. Invariants: partition and model agree record by record; a
// record is never held by two consumers (acquisition only of records the
// model has available); delivery counts never exceed the limit; the SPSO
// never moves back and everything below it is done; the window stays
// within max.record.locks (plus one batch); the durable state equals the
// live state after every write; and at the end every record is accepted
// or archived (a drain with all locks expired reaches the log end).
func TestSharePartitionModel(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := int64(0); seed < int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 20 + rng.Int63n(100)
		log, recs, maxBatch, maxGapSeen := randomLog(rng, n)
		cfg := Config{
			LockDurationMs:     100,
			DeliveryCountLimit: int16(2 + rng.Intn(4)),
			MaxRecordLocks:     4 + rng.Intn(20),
		}
		r := &propRun{
			t: t, rng: rng, cfg: cfg, log: log, maxBatch: maxBatch, maxGap: maxGapSeen,
			p: New(cfg, 0), m: &model{cfg: cfg, recs: recs}, j: NewJournal(),
			key: Key{Group: "g", TopicID: testTopic, Partition: int32(seed)},
		}
		r.j.UpdatesPerSnapshot = 1 + rng.Intn(6)
		rec, err := r.j.Initialize(r.key, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.logState(rec)
		members := []string{"m0", "m1", "m2", "m3"}[:1+rng.Intn(4)]
		for step := 0; step < 300; step++ {
			r.now += rng.Int63n(40)
			member := members[rng.Intn(len(members))]
			switch x := rng.Intn(100); {
			case x < 40:
				r.acquire(member)
			case x < 80:
				r.ack(member)
			case x < 85:
				r.now += cfg.LockDurationMs
				r.ops = append(r.ops, fmt.Sprintf("t=%d expire -> %d", r.now, r.p.Expire(r.now)))
				r.m.expire(r.now)
			case x < 87:
				// Retention or DeleteRecords moved the log start.
				to := r.p.StartOffset() + rng.Int63n(5)
				r.p.AdvanceStart(to, r.now)
				r.ops = append(r.ops, fmt.Sprintf("t=%d advance-start %d", r.now, to))
				r.m.expire(r.now)
				for o := int64(0); o < min(to, n); o++ {
					if mr := &r.m.recs[o]; !r.m.done(int(o)) {
						mr.state, mr.member, mr.deadline = Archived, "", 0
					}
				}
			case x < 90:
				got := r.p.ReleaseMember(member, r.now)
				r.ops = append(r.ops, fmt.Sprintf("t=%d release-member %s -> %d", r.now, member, got))
				r.m.expire(r.now)
				for i := range r.m.recs {
					if mr := &r.m.recs[i]; mr.state == Acquired && mr.member == member {
						r.m.release(mr)
					}
				}
			default:
				r.persist()
				r.ops = append(r.ops, fmt.Sprintf("t=%d crash+restart", r.now))
				r.restart()
			}
			r.persist()
			r.check()
		}
		// Drain: the locks expire, one consumer takes and accepts
		// everything; this must reach the end of the log.
		for i := 0; r.p.StartOffset() < n; i++ {
			if i > int(n)*int(cfg.DeliveryCountLimit)+10 {
				r.fatalf("seed %d: drain stuck at SPSO %d of %d", seed, r.p.StartOffset(), n)
			}
			r.now += cfg.LockDurationMs
			r.acquire("drain")
			r.m.expire(r.now)
			var acks []AckBatch
			for o, mr := range r.m.recs {
				if mr.state == Acquired && mr.member == "drain" {
					acks = append(acks, AckBatch{First: int64(o), Last: int64(o), Types: []AckType{AckAccept}})
				}
			}
			if err := r.p.Acknowledge("drain", acks, r.now); err != nil {
				r.fatalf("drain ack: %v", err)
			}
			for _, a := range acks {
				r.m.recs[a.First].state, r.m.recs[a.First].member = Acknowledged, ""
			}
			r.persist()
			r.check()
		}
		for o := range r.m.recs {
			if !r.m.done(o) {
				r.fatalf("seed %d: offset %d ends %s", seed, o, r.m.recs[o].state)
			}
		}
		if r.p.InFlight() != 0 || r.p.AcquiredCount() != 0 {
			r.fatalf("seed %d: drained partition still has %d in flight", seed, r.p.InFlight())
		}
	}
}
