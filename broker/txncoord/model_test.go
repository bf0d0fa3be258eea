package txncoord

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// sim drives a Coordinator with random clients, acknowledgements, scans
// and failovers, playing the broker: it keeps the durable log of each
// __transaction_state partition, the appends and markers in flight.
type sim struct {
	t        *testing.T
	rng      *rand.Rand
	cfg      Config
	c        *Coordinator
	now      int64
	nextPID  int64
	epoch    int32
	log      map[int32][]Record
	pending  []Append
	markers  []MarkerAck // one per partition in flight (Err filled when acked)
	nextReq  ReqID
	waiting  map[ReqID]bool      // requests not answered yet
	known    map[string][2]int64 // newest producer handed out per id
	outcome  map[string]bool     // "id/pid/start" → commit, for every marker sent
	lastRec  map[string]*TxnRecord
	initOf   map[ReqID]string // InitProducerId requests → their id
	before   *txnMeta         // the id's metadata before the current step
	asked    map[ReqID]simReq // what each request asked, to check its answer
	steps    int
	illegals []string
}

var simIDs = []string{"a", "b", "c", "d"}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b9)), cfg: Config{Partitions: 2, MaxTimeoutMs: 10_000, IDExpirationMs: 50_000},
		nextPID: 1, epoch: 1, log: map[int32][]Record{}, waiting: map[ReqID]bool{}, known: map[string][2]int64{},
		outcome: map[string]bool{}, lastRec: map[string]*TxnRecord{}, initOf: map[ReqID]string{}, asked: map[ReqID]simReq{}}
	// "d" starts near epoch exhaustion, so runs rotate its producer id.
	d := Append{TxnID: "d", Partition: PartitionFor("d", s.cfg.Partitions), Key: EncodeKey("d"), Value: EncodeValue(TxnRecord{
		ProducerID: 0, PreviousProducerID: -1, Epoch: math.MaxInt16 - 4, TimeoutMs: 5000, State: CompleteCommit})}
	s.durable(d)
	s.known["d"] = [2]int64{0, math.MaxInt16 - 4}
	s.c = New(s.cfg, s.alloc)
	for p := int32(0); p < s.cfg.Partitions; p++ {
		s.apply(s.load(p))
	}
	return s
}

func (s *sim) alloc() (int64, error) {
	s.nextPID++
	return s.nextPID - 1, nil
}

func (s *sim) load(p int32) Effects {
	e, err := s.c.Load(s.now, p, s.epoch, s.log[p])
	if err != nil {
		s.t.Fatalf("load: %v", err)
	}
	return e
}

// apply takes in the Effects of a call, checking them as it goes.
func (s *sim) apply(e Effects) {
	for _, a := range e.Answers {
		if id, ok := s.initOf[a.Req]; ok && a.Err == 0 {
			s.known[id] = [2]int64{a.ProducerID, int64(a.Epoch)}
		}
		s.checkAnswer(a)
		if !s.waiting[a.Req] {
			s.t.Fatalf("step %d: request %d answered twice or never asked", s.steps, a.Req)
		}
		delete(s.waiting, a.Req)
	}
	s.pending = append(s.pending, e.Appends...)
	for _, m := range e.Markers {
		if m.CoordinatorEpoch != s.epoch {
			s.t.Fatalf("step %d: marker with coordinator epoch %d, current %d", s.steps, m.CoordinatorEpoch, s.epoch)
		}
		rec := s.lastRec[m.TxnID]
		if rec == nil {
			s.t.Fatalf("step %d: marker for %s which has no record", s.steps, m.TxnID)
		}
		want := PrepareAbort
		if m.Commit {
			want = PrepareCommit
		}
		if rec.State != want || rec.ProducerID != m.ProducerID || rec.Epoch != m.Epoch {
			s.t.Fatalf("step %d: marker %+v but the log says %s", s.steps, m, recordString(*rec))
		}
		key := fmt.Sprintf("%s/%d/%d", m.TxnID, m.ProducerID, rec.StartMs)
		if c, ok := s.outcome[key]; ok && c != m.Commit {
			s.t.Fatalf("step %d: transaction %s got both a commit and an abort marker", s.steps, key)
		}
		s.outcome[key] = m.Commit
		for _, tp := range m.Partitions {
			if !slices.Contains(rec.Partitions, tp) {
				s.t.Fatalf("step %d: marker for %s outside the transaction %v", s.steps, tp, rec.Partitions)
			}
			s.markers = append(s.markers, MarkerAck{TxnID: m.TxnID, CoordinatorEpoch: m.CoordinatorEpoch,
				ProducerID: m.ProducerID, Epoch: m.Epoch, Partition: tp})
		}
	}
	for _, n := range e.Notes {
		if strings.Contains(n, "illegal") || strings.Contains(n, "invalid transition") || strings.Contains(n, "while") {
			s.illegals = append(s.illegals, n)
		}
	}
}

// durable appends a to the log, checking the transition it records
// against the previous record of its id.
func (s *sim) durable(a Append) {
	prev := s.lastRec[a.TxnID]
	if a.Value == nil {
		if prev == nil || !expirationAllowed(prev.State) {
			s.t.Fatalf("step %d: tombstone of %s after %v", s.steps, a.TxnID, prev)
		}
		delete(s.lastRec, a.TxnID)
	} else {
		r, err := DecodeValue(a.Value)
		if err != nil {
			s.t.Fatalf("step %d: %v", s.steps, err)
		}
		switch {
		case prev == nil && r.State != Empty && s.steps > 0:
			s.t.Fatalf("step %d: %s starts in %s", s.steps, a.TxnID, r.State)
		case prev != nil && !ValidTransition(prev.State, r.State):
			s.t.Fatalf("step %d: %s: illegal transition %s → %s", s.steps, a.TxnID, prev.State, r.State)
		case prev != nil && prev.ProducerID == r.ProducerID && r.Epoch < prev.Epoch:
			s.t.Fatalf("step %d: %s: epoch went back %d → %d", s.steps, a.TxnID, prev.Epoch, r.Epoch)
		case prev != nil && r.State == Ongoing && prev.State == Ongoing && !setOf(r.Partitions).containsAll(prev.Partitions):
			s.t.Fatalf("step %d: %s: partitions shrank while Ongoing", s.steps, a.TxnID)
		}
		s.lastRec[a.TxnID] = &r
	}
	s.log[a.Partition] = append(s.log[a.Partition], Record{Key: a.Key, Value: a.Value})
}

func (s *sim) req() ReqID {
	s.nextReq++
	s.waiting[s.nextReq] = true
	return s.nextReq
}

// producer picks the producer a client names: mostly the newest one
// handed out, sometimes a stale or made-up one.
func (s *sim) producer(id string) (int64, int16) {
	k := s.known[id]
	switch s.rng.IntN(10) {
	case 0:
		return k[0], int16(k[1]) - 1
	case 1:
		return k[0] + 1, int16(k[1])
	}
	return k[0], int16(k[1])
}

func (s *sim) step() {
	s.steps++
	s.now += 1 + int64(s.rng.IntN(800))
	id := simIDs[s.rng.IntN(len(simIDs))]
	tps := func() []TopicPartition {
		var out []TopicPartition
		for i := s.rng.IntN(3); i >= 0; i-- {
			out = append(out, TopicPartition{fmt.Sprintf("t%d", s.rng.IntN(2)), int32(s.rng.IntN(3))})
		}
		return out
	}
	// The live metadata before the call, for fenced().
	s.before = nil
	if pt := s.c.parts[PartitionFor(id, s.cfg.Partitions)]; pt != nil && pt.txns[id] != nil {
		m := *pt.txns[id]
		s.before = &m
	}
	switch op := s.rng.IntN(100); {
	case op < 12:
		r := InitRequest{Req: s.req(), Version: int16(s.rng.IntN(6)), TxnID: id, TimeoutMs: int32(1 + s.rng.IntN(12_000)), ProducerID: -1, Epoch: -1}
		if r.Version >= 3 && s.rng.IntN(3) == 0 {
			r.ProducerID, r.Epoch = s.producer(id)
		}
		s.initOf[r.Req] = id
		s.asked[r.Req] = simReq{kind: "init", id: id}
		s.apply(s.c.InitProducerID(s.now, r))
	case op < 27:
		pid, epoch := s.producer(id)
		r := AddRequest{Req: s.req(), Version: int16(s.rng.IntN(4)), TxnID: id, ProducerID: pid, Epoch: epoch, Partitions: tps()}
		s.asked[r.Req] = simReq{kind: "add", id: id, pid: pid, epoch: epoch, tps: r.Partitions}
		s.apply(s.fenced(id, pid, epoch, s.c.AddPartitions(s.now, r)))
	case op < 30:
		pid, epoch := s.producer(id)
		s.apply(s.fenced(id, pid, epoch, s.c.AddOffsets(s.now, AddOffsetsRequest{Req: s.req(), Version: 3, TxnID: id, ProducerID: pid, Epoch: epoch, Group: "g"})))
	case op < 40:
		pid, epoch := s.producer(id)
		r := EndRequest{Req: s.req(), Version: int16(s.rng.IntN(5)), TxnID: id, ProducerID: pid, Epoch: epoch, Commit: s.rng.IntN(2) == 0}
		s.asked[r.Req] = simReq{kind: "end", id: id, pid: pid, epoch: epoch, commit: r.Commit}
		s.apply(s.fenced(id, pid, epoch, s.c.EndTxn(s.now, r)))
	case op < 43:
		pid, epoch := s.producer(id)
		s.c.Verify(VerifyRequest{TxnID: id, ProducerID: pid, Epoch: epoch, Partitions: tps()})
	case op < 65:
		if len(s.pending) == 0 {
			return
		}
		i := s.rng.IntN(len(s.pending))
		a := s.pending[i]
		s.pending = slices.Delete(s.pending, i, i+1)
		code := int16(0)
		if s.rng.IntN(6) == 0 {
			code = []int16{kerr.NotEnoughReplicas.Code, kerr.RequestTimedOut.Code, kerr.NotLeaderForPartition.Code, kerr.MessageTooLarge.Code}[s.rng.IntN(4)]
		}
		if code == 0 {
			s.durable(a)
		}
		s.apply(s.c.AppendDone(s.now, a.Token, code))
	case op < 87:
		if len(s.markers) == 0 {
			return
		}
		i := s.rng.IntN(len(s.markers))
		a := s.markers[i]
		s.markers = slices.Delete(s.markers, i, i+1)
		if s.rng.IntN(5) == 0 {
			a.Err = []int16{kerr.NotLeaderForPartition.Code, kerr.RequestTimedOut.Code, kerr.UnknownTopicOrPartition.Code, kerr.NetworkException.Code}[s.rng.IntN(4)]
		}
		if s.rng.IntN(40) == 0 {
			a.Err = kerr.TransactionCoordinatorFenced.Code
		}
		a.Deleted = s.rng.IntN(30) == 0
		s.apply(s.c.MarkerDone(s.now, a))
	case op < 92:
		s.apply(s.c.AbortTimedOut(s.now))
	case op < 95:
		s.apply(s.c.ExpireIDs(s.now))
	case op < 96:
		s.c.Describe(simIDs)
		s.c.List(s.now, ListFilter{DurationMs: -1})
	case op < 98:
		s.reload()
	default:
		s.failover()
	}
}

// simReq is what a request asked.
type simReq struct {
	kind   string
	id     string
	pid    int64
	epoch  int16
	commit bool
	tps    []TopicPartition
}

// checkAnswer checks that a successful answer was given only once what it
// promises is durable: InitProducerId's producer is the id's newest Empty
// record; AddPartitionsToTxn's partitions are in its newest Ongoing (or a
// later) record; EndTxn's outcome is the newest PrepareX/CompleteX.
func (s *sim) checkAnswer(a Answer) {
	q, ok := s.asked[a.Req]
	if !ok || a.Err != 0 {
		return
	}
	rec := s.lastRec[q.id]
	if rec == nil {
		s.t.Fatalf("step %d: %s %s answered NONE with nothing durable", s.steps, q.kind, q.id)
	}
	switch q.kind {
	case "init":
		if rec.State != Empty || rec.ProducerID != a.ProducerID || rec.Epoch != a.Epoch {
			s.t.Fatalf("step %d: init %s answered %d/%d, durable %s", s.steps, q.id, a.ProducerID, a.Epoch, recordString(*rec))
		}
	case "add":
		if rec.ProducerID != q.pid || rec.Epoch != q.epoch || rec.State == Empty {
			s.t.Fatalf("step %d: add %s answered NONE, durable %s", s.steps, q.id, recordString(*rec))
		}
		if rec.State == Ongoing && !setOf(rec.Partitions).containsAll(q.tps) {
			s.t.Fatalf("step %d: add %s %v answered NONE, durable %s", s.steps, q.id, q.tps, recordString(*rec))
		}
	case "end":
		want := []State{PrepareAbort, CompleteAbort}
		if q.commit {
			want = []State{PrepareCommit, CompleteCommit}
		}
		if !slices.Contains(want, rec.State) || rec.ProducerID != q.pid || rec.Epoch != q.epoch {
			s.t.Fatalf("step %d: end %s commit=%v answered NONE, durable %s", s.steps, q.id, q.commit, recordString(*rec))
		}
	}
}

// fenced checks that a request naming a producer other than the id's
// current one changed nothing and was answered with an error.
func (s *sim) fenced(id string, pid int64, epoch int16, e Effects) Effects {
	if s.before == nil || (s.before.producerID == pid && s.before.epoch == epoch) {
		return e
	}
	if len(e.Appends) > 0 || len(e.Answers) != 1 || e.Answers[0].Err == 0 {
		s.t.Fatalf("step %d: %s: producer %d/%d (current %d/%d) was not refused: %+v", s.steps, id, pid, epoch, s.before.producerID, s.before.epoch, e)
	}
	return e
}

// failover: the coordinator dies; each append in flight either made it
// to the log or not, the next coordinator replays at a higher epoch, and
// requests in flight are lost with their connections.
func (s *sim) failover() {
	for _, a := range s.pending {
		if s.rng.IntN(2) == 0 {
			s.durable(a)
		}
	}
	s.pending, s.markers = nil, nil
	clear(s.waiting)
	s.epoch++
	s.c = New(s.cfg, s.alloc)
	for p := int32(0); p < s.cfg.Partitions; p++ {
		s.apply(s.load(p))
	}
}

// reload: the same coordinator loses a __transaction_state partition and
// gets it back at a higher epoch (a leadership bounce). Unload must answer
// the requests waiting on that partition's appends (NOT_COORDINATOR);
// those appends may have landed; their late acknowledgements, and acks of
// the old epoch's markers, must change nothing.
func (s *sim) reload() {
	p := int32(s.rng.IntN(int(s.cfg.Partitions)))
	var stale []Append
	var keep []Append
	for _, a := range s.pending {
		if a.Partition != p {
			keep = append(keep, a)
			continue
		}
		if s.rng.IntN(2) == 0 {
			s.durable(a)
		}
		stale = append(stale, a)
	}
	s.pending = keep
	var staleMarkers, keepMarkers []MarkerAck
	for _, m := range s.markers {
		if PartitionFor(m.TxnID, s.cfg.Partitions) == p {
			staleMarkers = append(staleMarkers, m)
		} else {
			keepMarkers = append(keepMarkers, m)
		}
	}
	s.markers = keepMarkers
	e := s.c.Unload(p)
	for _, a := range e.Answers {
		if a.Err != kerr.NotCoordinator.Code {
			s.t.Fatalf("step %d: unload answered %+v", s.steps, a)
		}
	}
	s.apply(e)
	// Only epoch-keyed state moves on: one epoch for all partitions keeps
	// the sim simple (the other partition's markers carry the old epoch and
	// are dropped the same way).
	s.epoch++
	for q := int32(0); q < s.cfg.Partitions; q++ {
		if q != p {
			s.apply(s.c.Unload(q))
			for _, a := range s.pending {
				if a.Partition == q {
					stale = append(stale, a)
				}
			}
			staleMarkers = append(staleMarkers, s.markers...)
		}
	}
	s.pending, s.markers = nil, nil
	for q := int32(0); q < s.cfg.Partitions; q++ {
		s.apply(s.c.BeginLoad(q, s.epoch))
	}
	for _, a := range stale {
		if e := s.c.AppendDone(s.now, a.Token, 0); len(e.Answers)+len(e.Appends)+len(e.Markers) > 0 {
			s.t.Fatalf("step %d: stale append ack while loading did something: %+v", s.steps, e)
		}
	}
	for q := int32(0); q < s.cfg.Partitions; q++ {
		s.apply(s.load(q))
	}
	for _, a := range stale {
		if e := s.c.AppendDone(s.now, a.Token, 0); len(e.Answers)+len(e.Appends)+len(e.Markers) > 0 {
			s.t.Fatalf("step %d: stale append ack did something: %+v", s.steps, e)
		}
	}
	for _, m := range staleMarkers {
		var before int
		live := s.c.parts[PartitionFor(m.TxnID, s.cfg.Partitions)].txns[m.TxnID]
		if live != nil {
			before = len(live.remaining)
		}
		if e := s.c.MarkerDone(s.now, m); len(e.Answers)+len(e.Appends)+len(e.Markers) > 0 {
			s.t.Fatalf("step %d: stale marker ack did something: %+v", s.steps, e)
		}
		if live != nil && len(live.remaining) != before {
			s.t.Fatalf("step %d: stale marker ack of %s counted", s.steps, m.Partition)
		}
	}
}

// checkReplay rebuilds the state from the log in a fresh coordinator and
// compares it with the live one: every id's durable metadata is equal,
// except an id whose first InitProducerId never became durable (not in
// the log) and the in-memory epoch of a failed fence (one above the log).
func (s *sim) checkReplay() {
	r := New(s.cfg, func() (int64, error) { return 0, fmt.Errorf("no") })
	for p := int32(0); p < s.cfg.Partitions; p++ {
		if _, err := r.Load(s.now, p, s.epoch, s.log[p]); err != nil {
			s.t.Fatalf("step %d: replay: %v", s.steps, err)
		}
	}
	for p := int32(0); p < s.cfg.Partitions; p++ {
		live, replayed := s.c.parts[p].txns, r.parts[p].txns
		for _, id := range slices.Sorted(maps.Keys(live)) {
			m := live[id]
			got := replayed[id]
			if m.epoch == -1 {
				if got != nil {
					s.t.Fatalf("step %d: %s: never durable but replayed", s.steps, id)
				}
				continue
			}
			if got == nil {
				s.t.Fatalf("step %d: %s: live %s, not in the replay", s.steps, id, recordString(m.durable()))
			}
			want := m.durable()
			if m.epochAhead {
				want.Epoch--
			}
			if !want.equal(got.durable()) {
				s.t.Fatalf("step %d: %s:\nlive     %s\nreplayed %s", s.steps, id, recordString(want), recordString(got.durable()))
			}
		}
		for id := range replayed {
			if live[id] == nil {
				s.t.Fatalf("step %d: %s replayed but not live", s.steps, id)
			}
		}
	}
}

// drain finishes everything in flight successfully: afterwards nothing is
// pending and every request has been answered.
func (s *sim) drain() {
	for i := 0; i < 10_000 && (len(s.pending) > 0 || len(s.markers) > 0); i++ {
		s.steps++
		if len(s.pending) > 0 {
			a := s.pending[0]
			s.pending = s.pending[1:]
			s.durable(a)
			s.apply(s.c.AppendDone(s.now, a.Token, 0))
			continue
		}
		a := s.markers[0]
		s.markers = s.markers[1:]
		s.apply(s.c.MarkerDone(s.now, a))
	}
	if len(s.waiting) > 0 {
		s.t.Fatalf("requests never answered: %v", slices.Sorted(maps.Keys(s.waiting)))
	}
}

// settle drains, fails over once if some transaction's markers were
// stopped (a fenced coordinator leaves them to the next one), drains
// again, and checks that no transaction is left prepared or pending.
func (s *sim) settle() {
	s.drain()
	for _, pt := range s.c.parts {
		for _, m := range pt.txns {
			if m.stopped || m.hasPending() {
				s.failover()
				s.drain()
				break
			}
		}
	}
	for _, pt := range s.c.parts {
		for id, m := range pt.txns {
			if m.hasPending() || m.state == PrepareCommit || m.state == PrepareAbort {
				s.t.Fatalf("after settling, %s is %s pending %s", id, m.state, m.pending)
			}
		}
	}
}

// TestCoordinatorModel runs random operation sequences (clients naming
// current, stale and wrong producers, appends acknowledged, failed or lost
// in a failover, markers acked with retriable, dropping and fencing
// errors, timeout scans, expiry sweeps, failovers) and checks after every
// step that each record appended is a legal transition from the previous
// record of its id, that markers agree with the log and no transaction
// gets both outcomes, and that replaying the log rebuilds the live state;
// at the end, that every request was answered exactly once.
func TestCoordinatorModel(t *testing.T) {
	seeds, steps := 300, 400
	if testing.Short() {
		seeds = 50
	}
	transitions := 0
	for seed := range uint64(seeds) {
		s := newSim(t, seed)
		for range steps {
			s.step()
			s.checkReplay()
		}
		s.settle()
		s.checkReplay()
		if len(s.illegals) > 0 {
			t.Fatalf("seed %d: %v", seed, s.illegals)
		}
		for _, recs := range s.log {
			transitions += len(recs)
		}
	}
	t.Logf("%d seeds × %d steps, %d records appended", seeds, steps, transitions)
}

// TestCoordinatorDeterministic: the same run twice appends the same bytes
// in the same order (no map order leaks into Effects).
func TestCoordinatorDeterministic(t *testing.T) {
	run := func(seed uint64) [][]byte {
		s := newSim(t, seed)
		var out [][]byte
		for range 300 {
			s.step()
			for _, a := range s.pending {
				out = append(out, append(append([]byte{}, a.Key...), a.Value...))
			}
			for _, m := range s.markers {
				out = append(out, []byte(fmt.Sprintf("%+v", m)))
			}
		}
		return out
	}
	for seed := range uint64(10) {
		a, b := run(seed), run(seed)
		if len(a) != len(b) {
			t.Fatalf("seed %d: %d vs %d effects", seed, len(a), len(b))
		}
		for i := range a {
			if string(a[i]) != string(b[i]) {
				t.Fatalf("seed %d: effect %d differs", seed, i)
			}
		}
	}
}
