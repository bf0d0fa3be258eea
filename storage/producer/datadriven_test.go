package producer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"
)

// TestRuleScripts runs the scenarios under testdata/rules: a partition
// log in memory, a State driven the way the broker drives it (a Tx around
// each request), and a readable trace. Commands:
//
//	produce pid=<id> epoch=<e> seq=<s> [n=<records>] [txn]  one batch, one request
//	request [fail-append]                                   one request, a batch per input line (same keys)
//	plain [n=<records>]                                     a batch without producer id
//	tick ms=<ms>                                            advance the clock
//	truncate off=<o>                                        truncate log and state to o
//	expire                                                  RemoveExpired at the current time
//	restart [corrupt] [snapshot-at=<o>]                     snapshot (at o, default the end), then Load from it and the log
//	state                                                   every producer entry
//
// Regenerate expectations with -rewrite, then read the diff.
func TestRuleScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/rules", func(t *testing.T, path string) {
		sc := &script{p: newPartition(Options{ExpirationMs: 1000})}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return sc.run(t, d)
		})
	})
}

type script struct {
	p *partition
}

// parseHdr reads "pid=1 epoch=0 seq=0 n=3 txn" into a header.
func parseHdr(t *testing.T, fields []string) batch.Header {
	h := hdr(0, 0, 0, 1)
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		if k == "txn" {
			h.Attributes |= attrTransactional
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("bad argument %q", f)
		}
		switch k {
		case "pid":
			h.ProducerID = n
		case "epoch":
			h.ProducerEpoch = int16(n)
		case "seq":
			h.BaseSequence = int32(n)
		case "n":
			h.LastOffsetDelta, h.NumRecords = int32(n-1), int32(n)
		default:
			t.Fatalf("unknown argument %q", f)
		}
	}
	return h
}

func argFields(d *datadriven.TestData) []string {
	var fs []string
	for _, a := range d.CmdArgs {
		fs = append(fs, a.String())
	}
	return fs
}

func errName(err error) string {
	for _, c := range []*kerr.Error{kerr.OutOfOrderSequenceNumber, kerr.InvalidProducerEpoch, kerr.InvalidRecord} {
		if errors.Is(err, c) {
			return c.Message
		}
	}
	return err.Error()
}

// request runs hs as one produce request through a Tx.
func (sc *script) request(hs []batch.Header, failAppend bool) string {
	p := sc.p
	tx := p.st.Begin()
	next := p.next
	var out []string
	for i, h := range hs {
		dup, err := tx.Check(h)
		switch {
		case err != nil:
			tx.Abort()
			return strings.Join(append(out, fmt.Sprintf("batch %d: %s; request aborted", i, errName(err))), "\n")
		case dup != nil:
			tx.Abort()
			return strings.Join(append(out, fmt.Sprintf("batch %d: duplicate of offsets %d-%d; nothing appended", i, dup.FirstOffset, dup.LastOffset)), "\n")
		}
		tx.Update(h, next, p.now)
		out = append(out, fmt.Sprintf("batch %d: offsets %d-%d", i, next, next+int64(h.LastOffsetDelta)))
		next += int64(h.LastOffsetDelta) + 1
	}
	if failAppend {
		tx.Abort()
		return strings.Join(append(out, "append failed; request aborted"), "\n")
	}
	tx.Commit()
	for _, h := range hs {
		h.BaseOffset = p.next
		h.MaxTimestamp = p.now
		p.log = append(p.log, appended{h: h, base: p.next})
		p.next += int64(h.LastOffsetDelta) + 1
	}
	if len(hs) == 1 {
		return strings.TrimPrefix(out[0], "batch 0: ")
	}
	return strings.Join(out, "\n")
}

func (sc *script) run(t *testing.T, d *datadriven.TestData) string {
	p := sc.p
	switch d.Cmd {
	case "produce":
		return sc.request([]batch.Header{parseHdr(t, argFields(d))}, false)
	case "request":
		var hs []batch.Header
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			hs = append(hs, parseHdr(t, strings.Fields(line)))
		}
		return sc.request(hs, d.HasArg("fail-append"))
	case "plain":
		h := parseHdr(t, argFields(d))
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = -1, -1, -1
		return sc.request([]batch.Header{h}, false)
	case "tick":
		var ms int
		d.ScanArgs(t, "ms", &ms)
		p.now += int64(ms)
		return fmt.Sprintf("now=%d", p.now)
	case "truncate":
		var off int
		d.ScanArgs(t, "off", &off)
		p.st.TruncateTo(int64(off))
		keep := p.log[:0]
		for _, a := range p.log {
			if a.base < int64(off) {
				keep = append(keep, a)
			}
		}
		p.log, p.next = keep, int64(off)
		return sc.state()
	case "expire":
		return fmt.Sprintf("expired %d\n%s", p.st.RemoveExpired(p.now), sc.state())
	case "restart":
		at := p.next
		if d.HasArg("snapshot-at") {
			var o int
			d.ScanArgs(t, "snapshot-at", &o)
			at = int64(o)
		}
		snap := p.st.SnapshotAt(at)
		if d.HasArg("corrupt") {
			snap[len(snap)/2] ^= 0x40
		}
		r := &replayer{log: p.log}
		st, res, err := Load(Options{ExpirationMs: 1000}, at, snap, p.now, r.replay)
		if err != nil {
			return "error: " + err.Error()
		}
		p.st = st
		out := fmt.Sprintf("loaded: replay from %d, %d batches replayed, %d expired", res.From, res.Replayed, res.Expired)
		if res.SnapshotErr != nil {
			out += "\nsnapshot refused: " + res.SnapshotErr.Error()
		}
		return out + "\n" + sc.state()
	case "state":
		return sc.state()
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func (sc *script) state() string {
	s := sc.p.st
	if s.Producers() == 0 {
		return "no producers"
	}
	var b strings.Builder
	for i, id := range s.sortedIDs() {
		e, _ := s.Entry(id)
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "pid=%d epoch=%d last-write=%d", e.ID, e.Epoch, e.LastTimestamp)
		if e.TxnFirstOffset >= 0 {
			fmt.Fprintf(&b, " txn-first-offset=%d", e.TxnFirstOffset)
		}
		b.WriteString(" batches:")
		for _, m := range e.Batches {
			fmt.Fprintf(&b, " seq %d-%d @%d-%d", m.FirstSeq, m.LastSeq, m.FirstOffset, m.LastOffset)
		}
	}
	return b.String()
}
