package deliverycheck

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// SendStatus is what a client knows about one send.
type SendStatus int8

const (
	// SendOK: acknowledged at [Send.Partition] / [Send.Offset].
	SendOK SendStatus = iota
	// SendFailed: definitely not written (the error promises it); reading
	// the value later is G1a.
	SendFailed
	// SendUnknown: indeterminate (a timeout, a lost connection, an error
	// after retries that may have written): the value may or may not be
	// in the log.
	SendUnknown
)

func (s SendStatus) String() string {
	switch s {
	case SendOK:
		return "ok"
	case SendFailed:
		return "failed"
	case SendUnknown:
		return "unknown"
	}
	return fmt.Sprintf("SendStatus(%d)", int8(s))
}

// MarshalText writes the status's name (the history's JSON).
func (s SendStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (s *SendStatus) UnmarshalText(b []byte) error {
	for _, c := range []SendStatus{SendOK, SendFailed, SendUnknown} {
		if c.String() == string(b) {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("deliverycheck: unknown send status %q", b)
}

// Send is one produced value and its outcome. Values must be unique
// across a history: the checker identifies records by value.
type Send struct {
	Value  string     `json:"value"`
	Status SendStatus `json:"status"`
	// Partition and Offset are the acknowledgement, for SendOK only.
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Err       string `json:"error,omitempty"` // the client's error, for SendFailed and SendUnknown
}

// Poll is one record a consumer read.
type Poll struct {
	// Consumer names the reader; Generation is its assignment generation
	// (bumped on every assignment change): offsets must rise within one
	// (consumer, generation, partition).
	Consumer   string `json:"consumer,omitempty"`
	Generation int32  `json:"generation,omitempty"`
	Partition  int32  `json:"partition"`
	Offset     int64  `json:"offset"`
	Value      string `json:"value"`
}

// History is what a run observed.
type History struct {
	Sends []Send `json:"sends"`
	Polls []Poll `json:"polls"`
	// Final is the final full read (after the faults healed): each
	// partition read from its log start to its end, in offset order.
	// Final reads are checked as polls of consumer "final" too.
	Final []Poll `json:"final"`
	// FinalEnds is the end offset each partition of the final read was
	// read up to; a partition absent here had no final read.
	FinalEnds map[int32]int64 `json:"final_ends"`
	// Idempotent: the producer was idempotent, so a duplicate is a
	// failure rather than a note.
	Idempotent bool `json:"idempotent"`
	// Checksummed: every value was made by [EncodeValue], so every value
	// read must pass [VerifyValue] (else it is corrupt), and each
	// producer's acknowledged records must keep its sequence order in
	// each partition (else they are reordered).
	Checksummed bool `json:"checksummed,omitempty"`
}

// Kind is an anomaly's kind.
type Kind string

// The kinds [Check] reports (see the package doc).
const (
	Lost               Kind = "lost"
	Unseen             Kind = "unseen"
	Duplicate          Kind = "duplicate"
	InconsistentOffset Kind = "inconsistent-offset"
	OffsetReused       Kind = "offset-reused"
	NonmonotonicPoll   Kind = "nonmonotonic-poll"
	PollSkip           Kind = "poll-skip"
	G1a                Kind = "G1a"
	Corrupt            Kind = "corrupt"
	Reordered          Kind = "reordered"
)

// Kinds lists every kind [Check] reports, in the order summaries print
// them.
var Kinds = []Kind{Lost, Unseen, Duplicate, InconsistentOffset, OffsetReused, NonmonotonicPoll, PollSkip, G1a, Corrupt, Reordered}

// Anomaly is one finding.
type Anomaly struct {
	Kind      Kind     `json:"kind"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`            // the offset concerned (for lost: the acknowledged one)
	Values    []string `json:"values"`            // the value(s) concerned, sorted
	Offsets   []int64  `json:"offsets,omitempty"` // for duplicates: every offset the value was seen at
	Detail    string   `json:"detail,omitempty"`
}

func (a Anomaly) String() string {
	s := fmt.Sprintf("%s p%d@%d %q", a.Kind, a.Partition, a.Offset, a.Values)
	if len(a.Offsets) > 0 {
		s += fmt.Sprintf(" offsets %v", a.Offsets)
	}
	if a.Detail != "" {
		s += ": " + a.Detail
	}
	return s
}

// Report is the verdict on a history.
type Report struct {
	Sends     int `json:"sends"`
	Acked     int `json:"acked"`
	Failed    int `json:"failed"`
	Unknown   int `json:"unknown"`
	Polls     int `json:"polls"`
	FinalRead int `json:"final_read"`
	// Anomalies, sorted by kind, partition, offset, values.
	Anomalies  []Anomaly `json:"anomalies"`
	idempotent bool
}

// Count returns how many anomalies of kind k the report holds.
func (r *Report) Count(k Kind) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Kind == k {
			n++
		}
	}
	return n
}

// Of returns the anomalies of kind k.
func (r *Report) Of(k Kind) []Anomaly {
	var out []Anomaly
	for _, a := range r.Anomalies {
		if a.Kind == k {
			out = append(out, a)
		}
	}
	return out
}

// ErrAnomalies is wrapped by [Report.Err] when the history breaks a rule.
var ErrAnomalies = errors.New("deliverycheck: anomalies")

// Err returns nil for a valid history, else an error listing the
// failures (at most 20 of them): every kind but unseen, and duplicate
// only with an idempotent producer.
func (r *Report) Err() error {
	var bad []string
	n := 0
	for _, a := range r.Anomalies {
		if !r.fails(a.Kind) {
			continue
		}
		n++
		if len(bad) < 20 {
			bad = append(bad, a.String())
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d (%s):\n  %s", ErrAnomalies, n, r.Summary(), strings.Join(bad, "\n  "))
}

func (r *Report) fails(k Kind) bool {
	switch k {
	case Unseen:
		return false
	case Duplicate:
		return r.idempotent
	}
	return true
}

// Summary is a one-line account: counts of operations and of each kind.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d sends (%d acked, %d failed, %d unknown), %d polls, %d in the final read",
		r.Sends, r.Acked, r.Failed, r.Unknown, r.Polls, r.FinalRead)
	for _, k := range Kinds {
		if c := r.Count(k); c > 0 {
			fmt.Fprintf(&b, ", %s %d", k, c)
		}
	}
	return b.String()
}

type po struct {
	p int32
	o int64
}

// obs is one observation of a value at an offset.
type obs struct {
	value string
	ack   bool // from a send's acknowledgement, not a read
}

// Check judges h. It is pure and deterministic.
func Check(h History) *Report {
	r := &Report{Sends: len(h.Sends), Polls: len(h.Polls), FinalRead: len(h.Final), idempotent: h.Idempotent}
	polls := make([]Poll, 0, len(h.Polls)+len(h.Final))
	polls = append(polls, h.Polls...)
	for _, p := range h.Final {
		p.Consumer, p.Generation = "final", 0
		polls = append(polls, p)
	}

	// at: every value observed at each offset; where: every offset each
	// value was observed at.
	at := map[po][]obs{}
	where := map[string]map[po]bool{}
	note := func(k po, v string, ack bool) {
		at[k] = append(at[k], obs{v, ack})
		if where[v] == nil {
			where[v] = map[po]bool{}
		}
		where[v][k] = true
	}
	status := map[string]SendStatus{}
	for _, s := range h.Sends {
		status[s.Value] = s.Status
		switch s.Status {
		case SendOK:
			r.Acked++
			note(po{s.Partition, s.Offset}, s.Value, true)
		case SendFailed:
			r.Failed++
		default:
			r.Unknown++
		}
	}
	read := map[string]bool{}
	maxRead := map[int32]int64{}
	for _, p := range polls {
		note(po{p.Partition, p.Offset}, p.Value, false)
		read[p.Value] = true
		if o, ok := maxRead[p.Partition]; !ok || p.Offset > o {
			maxRead[p.Partition] = p.Offset
		}
	}
	finalRead := map[string]bool{}
	for _, p := range h.Final {
		finalRead[p.Value] = true
	}

	// Two values at one offset.
	for k, os := range at {
		vals := map[string]bool{}
		acks := map[string]bool{}
		for _, o := range os {
			vals[o.value] = true
			if o.ack {
				acks[o.value] = true
			}
		}
		if len(acks) > 1 {
			r.add(Anomaly{Kind: OffsetReused, Partition: k.p, Offset: k.o, Values: keys(acks),
				Detail: "two sends acknowledged at one offset"})
		}
		if len(vals) > 1 && len(acks) < len(vals) {
			r.add(Anomaly{Kind: InconsistentOffset, Partition: k.p, Offset: k.o, Values: keys(vals)})
		}
	}
	// One value at two offsets.
	for v, ks := range where {
		if len(ks) < 2 {
			continue
		}
		var all []po
		for k := range ks {
			all = append(all, k)
		}
		sort.Slice(all, func(i, j int) bool { return less(all[i], all[j]) })
		offs := make([]int64, len(all))
		parts := map[int32]bool{}
		for i, k := range all {
			offs[i] = k.o
			parts[k.p] = true
		}
		d := ""
		if len(parts) > 1 {
			d = fmt.Sprintf("in partitions %v", sortedParts(parts))
		}
		r.add(Anomaly{Kind: Duplicate, Partition: all[0].p, Offset: all[0].o, Values: []string{v}, Offsets: offs, Detail: d})
	}
	// Acknowledged values never read.
	for _, s := range h.Sends {
		if s.Status != SendOK {
			continue
		}
		if end, ok := h.FinalEnds[s.Partition]; ok {
			if !finalRead[s.Value] {
				d := "not in the final read"
				if s.Offset >= end {
					d = fmt.Sprintf("the final read ends at %d: the log lost its acknowledged tail", end)
				}
				r.add(Anomaly{Kind: Lost, Partition: s.Partition, Offset: s.Offset, Values: []string{s.Value}, Detail: d})
			}
			continue
		}
		if read[s.Value] {
			continue
		}
		if o, ok := maxRead[s.Partition]; ok && o > s.Offset {
			r.add(Anomaly{Kind: Lost, Partition: s.Partition, Offset: s.Offset, Values: []string{s.Value},
				Detail: fmt.Sprintf("never read; offset %d of the partition was", o)})
		} else {
			r.add(Anomaly{Kind: Unseen, Partition: s.Partition, Offset: s.Offset, Values: []string{s.Value}})
		}
	}
	// A definitely failed send read anyway.
	for _, p := range polls {
		if status[p.Value] == SendFailed {
			r.add(Anomaly{Kind: G1a, Partition: p.Partition, Offset: p.Offset, Values: []string{p.Value},
				Detail: fmt.Sprintf("read by %s though its send failed", p.Consumer)})
		}
	}
	if h.Checksummed {
		r.checkChecksums(polls)
		r.checkProducerOrder(h.Sends)
	}
	r.checkOrder(polls, at)
	r.sortDedup()
	return r
}

// checkChecksums reports each value read that fails [VerifyValue], once
// per offset and value, naming every reader that saw it.
func (r *Report) checkChecksums(polls []Poll) {
	type bad struct {
		k po
		v string
	}
	readers := map[bad][]string{}
	why := map[bad]error{}
	var order []bad
	for _, p := range polls {
		err := VerifyValue(p.Value)
		if err == nil {
			continue
		}
		b := bad{po{p.Partition, p.Offset}, p.Value}
		if _, ok := why[b]; !ok {
			why[b] = err
			order = append(order, b)
		}
		if rs := readers[b]; len(rs) == 0 || rs[len(rs)-1] != p.Consumer {
			readers[b] = append(rs, p.Consumer)
		}
	}
	for _, b := range order {
		rs := readers[b]
		sort.Strings(rs)
		r.add(Anomaly{Kind: Corrupt, Partition: b.k.p, Offset: b.k.o, Values: []string{b.v},
			Detail: fmt.Sprintf("%v; read by %s", why[b], strings.Join(slices.Compact(rs), ", "))})
	}
}

// checkProducerOrder finds acknowledged records of one producer in one
// partition whose offsets invert the order it sent them in (its
// sequence): an idempotent producer's records keep their order in each
// partition. Equal offsets are offset-reused, reported already.
func (r *Report) checkProducerOrder(sends []Send) {
	type pp struct {
		producer string
		p        int32
	}
	type sent struct {
		seq, off int64
		v        string
	}
	by := map[pp][]sent{}
	for _, s := range sends {
		if s.Status != SendOK {
			continue
		}
		prod, seq, err := ParseValue(s.Value)
		if err != nil {
			continue
		}
		k := pp{prod, s.Partition}
		by[k] = append(by[k], sent{seq, s.Offset, s.Value})
	}
	for k, l := range by {
		sort.Slice(l, func(i, j int) bool { return l[i].seq < l[j].seq })
		hi := l[0] // the highest offset so far, in sequence order
		for _, s := range l[1:] {
			if s.off < hi.off {
				vs := []string{hi.v, s.v}
				sort.Strings(vs)
				r.add(Anomaly{Kind: Reordered, Partition: k.p, Offset: s.off, Values: vs,
					Detail: fmt.Sprintf("producer %s: sequence %d acknowledged at offset %d, below sequence %d at %d",
						k.producer, s.seq, s.off, hi.seq, hi.off)})
				continue
			}
			hi = s
		}
	}
}

// checkOrder finds nonmonotonic polls and skips per (consumer,
// generation, partition), in the order each consumer read.
func (r *Report) checkOrder(polls []Poll, at map[po][]obs) {
	type cgp struct {
		c string
		g int32
		p int32
	}
	// known offsets per partition, sorted, to find skipped ones.
	knownSet := map[int32]map[int64]bool{}
	for k := range at {
		if knownSet[k.p] == nil {
			knownSet[k.p] = map[int64]bool{}
		}
		knownSet[k.p][k.o] = true
	}
	known := map[int32][]int64{}
	for p, set := range knownSet {
		for o := range set {
			known[p] = append(known[p], o)
		}
		sort.Slice(known[p], func(i, j int) bool { return known[p][i] < known[p][j] })
	}
	last := map[cgp]Poll{}
	for _, p := range polls {
		k := cgp{p.Consumer, p.Generation, p.Partition}
		prev, ok := last[k]
		last[k] = p
		if !ok {
			continue
		}
		if p.Offset <= prev.Offset {
			r.add(Anomaly{Kind: NonmonotonicPoll, Partition: p.Partition, Offset: p.Offset, Values: []string{p.Value},
				Detail: fmt.Sprintf("%s generation %d read offset %d after %d", p.Consumer, p.Generation, p.Offset, prev.Offset)})
			continue
		}
		ks := known[p.Partition]
		i := sort.Search(len(ks), func(i int) bool { return ks[i] > prev.Offset })
		if i < len(ks) && ks[i] < p.Offset {
			r.add(Anomaly{Kind: PollSkip, Partition: p.Partition, Offset: ks[i], Values: []string{p.Value},
				Detail: fmt.Sprintf("%s generation %d read offset %d after %d, skipping %d", p.Consumer, p.Generation, p.Offset, prev.Offset, ks[i])})
		}
	}
}

func (r *Report) add(a Anomaly) { r.Anomalies = append(r.Anomalies, a) }

func (r *Report) sortDedup() {
	sort.Slice(r.Anomalies, func(i, j int) bool {
		a, b := r.Anomalies[i], r.Anomalies[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		if a.Offset != b.Offset {
			return a.Offset < b.Offset
		}
		if x, y := strings.Join(a.Values, "\x00"), strings.Join(b.Values, "\x00"); x != y {
			return x < y
		}
		return a.Detail < b.Detail
	})
	out := r.Anomalies[:0]
	for i, a := range r.Anomalies {
		if i > 0 && a.String() == r.Anomalies[i-1].String() {
			continue
		}
		out = append(out, a)
	}
	r.Anomalies = out
}

func less(a, b po) bool {
	if a.p != b.p {
		return a.p < b.p
	}
	return a.o < b.o
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedParts(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
