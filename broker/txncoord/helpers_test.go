package txncoord

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
)

// codeNames maps Kafka error names (as kerr spells them) to codes.
var codeNames = func() map[string]int16 {
	m := map[string]int16{"NONE": 0}
	for code := int16(-1); code < 200; code++ {
		if err := kerr.ErrorForCode(code); err != nil {
			if ke, ok := err.(*kerr.Error); ok {
				m[ke.Message] = code
			}
		}
	}
	return m
}()

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}

// harness drives a Coordinator through datadriven scripts, playing the
// broker: it keeps the durable log of every __transaction_state partition
// (appends it acknowledged), the appends not yet acknowledged, the markers
// outstanding, a clock and a producer-id allocator.
type harness struct {
	cfg      Config
	c        *Coordinator
	now      int64
	nextPID  int64
	allocErr error
	nextReq  ReqID
	pending  []Append
	log      map[int32][]Record
	epochs   map[int32]int32
	markers  map[string]Marker   // newest marker seen per txn
	prod     map[string][2]int64 // newest producer id / epoch handed to a txn id
	reqs     map[ReqID]string    // what each request was, for printing
	inits    map[ReqID]string    // InitProducerId requests → their txn id
}

func newHarness(cfg Config) *harness {
	h := &harness{cfg: cfg, nextPID: 1000, log: map[int32][]Record{}, epochs: map[int32]int32{},
		markers: map[string]Marker{}, prod: map[string][2]int64{}, reqs: map[ReqID]string{}, inits: map[ReqID]string{}}
	h.c = New(cfg, h.allocate)
	return h
}

func (h *harness) allocate() (int64, error) {
	if h.allocErr != nil {
		return 0, h.allocErr
	}
	h.nextPID++
	return h.nextPID - 1, nil
}

func parseTPs(t *testing.T, s string) []TopicPartition {
	var out []TopicPartition
	for _, f := range strings.Split(s, ",") {
		i := strings.LastIndexByte(f, '-')
		if i < 0 {
			t.Fatalf("partition %q: want topic-N", f)
		}
		p, err := strconv.Atoi(f[i+1:])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, TopicPartition{f[:i], int32(p)})
	}
	return out
}

func tpsString(tps []TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tp.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func recordString(r TxnRecord) string {
	s := fmt.Sprintf("%s pid=%d epoch=%d timeout=%d start=%d update=%d tps=%s",
		r.State, r.ProducerID, r.Epoch, r.TimeoutMs, r.StartMs, r.LastUpdateMs, tpsString(r.Partitions))
	if r.PreviousProducerID >= 0 && r.PreviousProducerID != r.ProducerID {
		s += fmt.Sprintf(" prev-pid=%d", r.PreviousProducerID)
	}
	return s
}

func (h *harness) effects(e Effects) string {
	var b strings.Builder
	for _, a := range e.Answers {
		if id, ok := h.inits[a.Req]; ok && a.Err == 0 {
			h.prod[id] = [2]int64{a.ProducerID, int64(a.Epoch)}
		}
		fmt.Fprintf(&b, "answer %s: %s", h.reqs[a.Req], codeName(a.Err))
		if a.ProducerID >= 0 || a.Epoch >= 0 {
			fmt.Fprintf(&b, " pid=%d epoch=%d", a.ProducerID, a.Epoch)
		}
		b.WriteString("\n")
	}
	for _, a := range e.Appends {
		h.pending = append(h.pending, a)
		id, err := DecodeKey(a.Key)
		if err != nil || id != a.TxnID {
			fmt.Fprintf(&b, "BAD KEY %q %v\n", id, err)
		}
		if a.Value == nil {
			fmt.Fprintf(&b, "append #%d p=%d cepoch=%d %s: tombstone\n", a.Token, a.Partition, a.CoordinatorEpoch, a.TxnID)
			continue
		}
		r, err := DecodeValue(a.Value)
		if err != nil {
			fmt.Fprintf(&b, "BAD VALUE %v\n", err)
		}
		fmt.Fprintf(&b, "append #%d p=%d cepoch=%d %s: %s\n", a.Token, a.Partition, a.CoordinatorEpoch, a.TxnID, recordString(r))
	}
	for _, m := range e.Markers {
		h.markers[m.TxnID] = m
		res := "abort"
		if m.Commit {
			res = "commit"
		}
		fmt.Fprintf(&b, "marker %s %s pid=%d epoch=%d cepoch=%d %s\n", m.TxnID, res, m.ProducerID, m.Epoch, m.CoordinatorEpoch, tpsString(m.Partitions))
	}
	for _, n := range e.Notes {
		fmt.Fprintf(&b, "note %s\n", n)
	}
	if b.Len() == 0 {
		return "(nothing)\n"
	}
	return b.String()
}

func (h *harness) req(desc string) ReqID {
	h.nextReq++
	h.reqs[h.nextReq] = fmt.Sprintf("%s#%d", desc, h.nextReq)
	return h.nextReq
}

func (h *harness) producer(t *testing.T, td *datadriven.TestData, id string) (int64, int16) {
	p := h.prod[id]
	pid, epoch := p[0], int16(p[1])
	td.MaybeScanArgs(t, "pid", &pid)
	td.MaybeScanArgs(t, "epoch", &epoch)
	return pid, epoch
}

func (h *harness) version(t *testing.T, td *datadriven.TestData, def int16) int16 {
	v := def
	td.MaybeScanArgs(t, "v", &v)
	return v
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	var id string
	td.MaybeScanArgs(t, "id", &id)
	switch td.Cmd {
	case "new":
		cfg := Config{Partitions: 1}
		td.MaybeScanArgs(t, "partitions", &cfg.Partitions)
		td.MaybeScanArgs(t, "max-timeout", &cfg.MaxTimeoutMs)
		td.MaybeScanArgs(t, "expiration", &cfg.IDExpirationMs)
		*h = *newHarness(cfg)
		h.c = New(cfg, h.allocate) // bind the allocator to h, not the copy
		return "ok\n"
	case "advance":
		var ms int64
		td.ScanArgs(t, "ms", &ms)
		h.now += ms
		return fmt.Sprintf("now=%d\n", h.now)
	case "alloc":
		h.allocErr = nil
		if td.HasArg("err") {
			var name string
			td.ScanArgs(t, "err", &name)
			h.allocErr = kerr.ErrorForCode(codeNames[name])
		}
		return "ok\n"
	case "load":
		var p, epoch int32
		td.MaybeScanArgs(t, "p", &p)
		td.ScanArgs(t, "epoch", &epoch)
		h.epochs[p] = epoch
		e, err := h.c.Load(h.now, p, epoch, h.log[p])
		out := h.effects(e)
		if err != nil {
			out += fmt.Sprintf("error: %v\n", err)
		}
		return out
	case "begin-load":
		var p, epoch int32
		td.MaybeScanArgs(t, "p", &p)
		td.ScanArgs(t, "epoch", &epoch)
		return h.effects(h.c.BeginLoad(p, epoch))
	case "unload":
		var p int32
		td.MaybeScanArgs(t, "p", &p)
		return h.effects(h.c.Unload(p))
	case "failover":
		// A new coordinator process: appends not acknowledged are lost, the
		// log is replayed at a higher epoch.
		var epoch int32
		td.ScanArgs(t, "epoch", &epoch)
		h.c = New(h.cfg, h.allocate)
		h.pending, h.markers = nil, map[string]Marker{}
		var out strings.Builder
		for _, p := range slices.Sorted(maps.Keys(h.log)) {
			h.epochs[p] = epoch
			e, err := h.c.Load(h.now, p, epoch, h.log[p])
			out.WriteString(h.effects(e))
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
		}
		return out.String()
	case "seed":
		// Writes a record straight into the log (as an older coordinator
		// would have), for states a script cannot reach quickly.
		r := TxnRecord{PreviousProducerID: -1, StartMs: -1}
		var state string
		td.ScanArgs(t, "pid", &r.ProducerID)
		td.ScanArgs(t, "epoch", &r.Epoch)
		td.ScanArgs(t, "state", &state)
		r.TimeoutMs = 60000
		td.MaybeScanArgs(t, "timeout", &r.TimeoutMs)
		td.MaybeScanArgs(t, "start", &r.StartMs)
		td.MaybeScanArgs(t, "update", &r.LastUpdateMs)
		if td.HasArg("tps") {
			s := vals(td, "tps")
			r.Partitions = setOf(parseTPs(t, s)).sorted()
		}
		st, err := parseState(state)
		if err != nil {
			t.Fatal(err)
		}
		r.State = st
		p := PartitionFor(id, h.cfg.Partitions)
		h.log[p] = append(h.log[p], Record{Key: EncodeKey(id), Value: EncodeValue(r)})
		h.prod[id] = [2]int64{r.ProducerID, int64(r.Epoch)}
		return "ok\n"
	case "init":
		r := InitRequest{TxnID: id, TimeoutMs: 60000, ProducerID: -1, Epoch: -1, Version: h.version(t, td, 4)}
		td.MaybeScanArgs(t, "timeout", &r.TimeoutMs)
		td.MaybeScanArgs(t, "pid", &r.ProducerID)
		td.MaybeScanArgs(t, "epoch", &r.Epoch)
		r.Req = h.req("init " + id)
		h.inits[r.Req] = id
		return h.effects(h.c.InitProducerID(h.now, r))
	case "add":
		r := AddRequest{TxnID: id, Version: h.version(t, td, 3)}
		r.ProducerID, r.Epoch = h.producer(t, td, id)
		s := vals(td, "tps")
		r.Partitions = parseTPs(t, s)
		r.Req = h.req("add " + id)
		return h.effects(h.c.AddPartitions(h.now, r))
	case "offsets":
		r := AddOffsetsRequest{TxnID: id, Version: h.version(t, td, 3)}
		r.ProducerID, r.Epoch = h.producer(t, td, id)
		td.ScanArgs(t, "group", &r.Group)
		r.Req = h.req("offsets " + id)
		return h.effects(h.c.AddOffsets(h.now, r))
	case "verify":
		r := VerifyRequest{TxnID: id}
		r.ProducerID, r.Epoch = h.producer(t, td, id)
		s := vals(td, "tps")
		r.Partitions = parseTPs(t, s)
		var b strings.Builder
		for _, pr := range h.c.Verify(r) {
			fmt.Fprintf(&b, "%s: %s\n", pr.Partition, codeName(pr.Err))
		}
		return b.String()
	case "end":
		r := EndRequest{TxnID: id, Version: h.version(t, td, 3), Commit: td.HasArg("commit")}
		if !r.Commit && !td.HasArg("abort") {
			t.Fatal("end: commit or abort")
		}
		r.ProducerID, r.Epoch = h.producer(t, td, id)
		res := "abort"
		if r.Commit {
			res = "commit"
		}
		r.Req = h.req("end " + res + " " + id)
		return h.effects(h.c.EndTxn(h.now, r))
	case "ack":
		// Acknowledges the oldest n pending appends (n=all: every one),
		// with err=NAME as a failed append, or lost: durable but the
		// acknowledgement never arrives.
		n := 1
		if td.HasArg("n") {
			var s string
			td.ScanArgs(t, "n", &s)
			if s == "all" {
				n = len(h.pending)
			} else {
				n, _ = strconv.Atoi(s)
			}
		}
		var code int16
		if td.HasArg("err") {
			var name string
			td.ScanArgs(t, "err", &name)
			c, ok := codeNames[name]
			if !ok {
				t.Fatalf("unknown error %q", name)
			}
			code = c
		}
		lost := td.HasArg("lost")
		var out strings.Builder
		for i := 0; i < n && len(h.pending) > 0; i++ {
			a := h.pending[0]
			h.pending = h.pending[1:]
			if code == 0 {
				h.log[a.Partition] = append(h.log[a.Partition], Record{Key: a.Key, Value: a.Value})
			}
			if lost {
				fmt.Fprintf(&out, "#%d durable, ack lost\n", a.Token)
				continue
			}
			fmt.Fprintf(&out, "#%d %s\n", a.Token, codeName(code))
			out.WriteString(h.effects(h.c.AppendDone(h.now, a.Token, code)))
		}
		if out.Len() == 0 {
			return "no pending append\n"
		}
		return out.String()
	case "marker":
		// Acknowledges marker partitions of txn id (tps=..., default all
		// of the newest marker) with err=NAME or NONE, or as deleted (the
		// partition is gone from the metadata).
		m, ok := h.markers[id]
		if !ok {
			return "no marker\n"
		}
		tps := m.Partitions
		if td.HasArg("tps") {
			s := vals(td, "tps")
			tps = parseTPs(t, s)
		}
		var code int16
		if td.HasArg("err") {
			var name string
			td.ScanArgs(t, "err", &name)
			code = codeNames[name]
		}
		cepoch := m.CoordinatorEpoch
		td.MaybeScanArgs(t, "cepoch", &cepoch)
		var out strings.Builder
		for _, tp := range tps {
			fmt.Fprintf(&out, "%s %s\n", tp, codeName(code))
			out.WriteString(h.effects(h.c.MarkerDone(h.now, MarkerAck{TxnID: id, CoordinatorEpoch: cepoch,
				ProducerID: m.ProducerID, Epoch: m.Epoch, Partition: tp, Err: code, Deleted: td.HasArg("deleted")})))
		}
		return out.String()
	case "timeouts":
		return h.effects(h.c.AbortTimedOut(h.now))
	case "expire":
		return h.effects(h.c.ExpireIDs(h.now))
	case "describe":
		s := vals(td, "ids")
		var b strings.Builder
		for _, d := range h.c.Describe(strings.Split(s, ",")) {
			fmt.Fprintf(&b, "%s: %s", d.TransactionalID, codeName(d.ErrorCode))
			if d.ErrorCode == 0 {
				var tps []TopicPartition
				for _, tt := range d.Topics {
					for _, p := range tt.Partitions {
						tps = append(tps, TopicPartition{tt.Topic, p})
					}
				}
				fmt.Fprintf(&b, " state=%s pid=%d epoch=%d timeout=%d start=%d tps=%s", d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, d.StartTimestamp, tpsString(tps))
			}
			b.WriteString("\n")
		}
		return b.String()
	case "list":
		f := ListFilter{DurationMs: -1}
		if td.HasArg("states") {
			s := vals(td, "states")
			f.States = strings.Split(s, ",")
		}
		if td.HasArg("pids") {
			s := vals(td, "pids")
			for _, p := range strings.Split(s, ",") {
				v, _ := strconv.ParseInt(p, 10, 64)
				f.ProducerIDs = append(f.ProducerIDs, v)
			}
		}
		td.MaybeScanArgs(t, "duration", &f.DurationMs)
		resp := h.c.List(h.now, f)
		var b strings.Builder
		fmt.Fprintf(&b, "%s", codeName(resp.ErrorCode))
		if len(resp.UnknownStateFilters) > 0 {
			fmt.Fprintf(&b, " unknown=%v", resp.UnknownStateFilters)
		}
		b.WriteString("\n")
		for _, s := range resp.TransactionStates {
			fmt.Fprintf(&b, "%s pid=%d %s\n", s.TransactionalID, s.ProducerID, s.TransactionState)
		}
		return b.String()
	case "state":
		return h.state()
	case "log":
		var b strings.Builder
		for _, p := range slices.Sorted(maps.Keys(h.log)) {
			for i, r := range h.log[p] {
				k, _ := DecodeKey(r.Key)
				if r.Value == nil {
					fmt.Fprintf(&b, "p=%d @%d %s: tombstone\n", p, i, k)
					continue
				}
				v, err := DecodeValue(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "p=%d @%d %s: %s\n", p, i, k, recordString(v))
			}
		}
		return b.String()
	}
	t.Fatalf("unknown command %q", td.Cmd)
	return ""
}

// vals returns the values of key joined by commas ("" when absent).
func vals(td *datadriven.TestData, key string) string {
	a, ok := td.Arg(key)
	if !ok {
		return ""
	}
	return strings.Join(a.Vals, ",")
}

func parseState(s string) (State, error) {
	for st := Empty; st <= PrepareEpochFence; st++ {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown state %q", s)
}

// state prints every transactional id the coordinator holds.
func (h *harness) state() string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(h.c.parts)) {
		pt := h.c.parts[p]
		st := map[PartitionState]string{Loading: "loading", Loaded: "loaded"}[pt.state]
		fmt.Fprintf(&b, "partition %d %s cepoch=%d\n", p, st, pt.epoch)
		for _, id := range slices.Sorted(maps.Keys(pt.txns)) {
			m := pt.txns[id]
			fmt.Fprintf(&b, "  %s: %s", id, recordString(m.durable()))
			if m.lastEpoch >= 0 {
				fmt.Fprintf(&b, " last-epoch=%d", m.lastEpoch)
			}
			if m.hasPending() {
				fmt.Fprintf(&b, " pending=%s", m.pending)
			}
			if m.remaining != nil {
				fmt.Fprintf(&b, " awaiting=%s", tpsString(m.remaining.sorted()))
			}
			if m.stopped {
				b.WriteString(" stopped")
			}
			if m.epochAhead {
				b.WriteString(" epoch-ahead")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
