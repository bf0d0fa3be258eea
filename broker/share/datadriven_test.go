package share

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestSharePartitionScripts runs the share-partition scripts in
// testdata/partition. Commands (every one prints the result, then the
// window as `spso=S speo=E | offset:state/count[@member] ...`):
//
//	new [lock=MS] [limit=N] [locks=N] [start=O]
//	acquire member=M batches=F-L,F-L [max=N] [mode=batch|records] [now=MS]
//	ack member=M [now=MS]            input lines: F-L TYPE[,TYPE...]
//	expire now=MS
//	release-member member=M [now=MS]
//	advance-start to=O [now=MS]
//	update                           TakeUpdate
//	restart                          Snapshot, then Restore
func TestSharePartitionScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/partition", func(t *testing.T, path string) {
		var p *Partition
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			now := argInt(t, td, "now", 0)
			var res string
			switch td.Cmd {
			case "new":
				cfg := Config{
					LockDurationMs:     argInt(t, td, "lock", 1000),
					DeliveryCountLimit: int16(argInt(t, td, "limit", 5)),
					MaxRecordLocks:     int(argInt(t, td, "locks", 2000)),
				}
				p = New(cfg, argInt(t, td, "start", 0))
				res = "ok"
			case "acquire":
				mode := BatchOptimized
				if argStr(td, "mode", "batch") == "records" {
					mode = RecordLimit
				}
				got := p.Acquire(argStr(td, "member", ""), parseBatches(t, argStr(td, "batches", "")),
					int(argInt(t, td, "max", 500)), mode, now)
				res = fmtAcquired(got)
			case "ack":
				var acks []AckBatch
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					if line == "" {
						continue
					}
					f := strings.Fields(line)
					if len(f) != 2 {
						t.Fatalf("ack line %q", line)
					}
					b := parseBatches(t, f[0])[0]
					a := AckBatch{First: b.First, Last: b.Last}
					for _, ty := range strings.Split(f[1], ",") {
						a.Types = append(a.Types, parseAckType(t, ty))
					}
					acks = append(acks, a)
				}
				if err := p.Acknowledge(argStr(td, "member", ""), acks, now); err != nil {
					res = err.Error()
					if ke, ok := err.(*kerr.Error); ok {
						res = ke.Message
					}
				} else {
					res = "ok"
				}
			case "expire":
				res = fmt.Sprintf("expired %d", p.Expire(now))
			case "release-member":
				res = fmt.Sprintf("released %d", p.ReleaseMember(argStr(td, "member", ""), now))
			case "advance-start":
				p.AdvanceStart(argInt(t, td, "to", 0), now)
				res = "ok"
			case "update":
				u, ok := p.TakeUpdate()
				if !ok {
					res = "no update"
				} else {
					res = fmt.Sprintf("start=%d %s", u.StartOffset, fmtBatches(u.Batches))
				}
			case "restart":
				st := p.Snapshot()
				res = "snapshot " + fmt.Sprintf("start=%d %s", st.StartOffset, fmtBatches(st.Batches))
				var err error
				if p, err = Restore(p.Config(), st); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("unknown command %q", td.Cmd)
			}
			return res + "\n" + fmtPartition(p) + "\n"
		})
	})
}

func argInt(t *testing.T, td *datadriven.TestData, key string, def int64) int64 {
	for _, a := range td.CmdArgs {
		if a.Key == key {
			v, err := strconv.ParseInt(a.Vals[0], 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			return v
		}
	}
	return def
}

func argStr(td *datadriven.TestData, key, def string) string {
	for _, a := range td.CmdArgs {
		if a.Key == key {
			return strings.Join(a.Vals, ",")
		}
	}
	return def
}

func parseBatches(t *testing.T, s string) []Batch {
	var out []Batch
	for _, r := range strings.Split(s, ",") {
		if r == "" {
			continue
		}
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		f, err1 := strconv.ParseInt(lo, 10, 64)
		l, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad range %q", r)
		}
		out = append(out, Batch{First: f, Last: l})
	}
	return out
}

func parseAckType(t *testing.T, s string) AckType {
	switch s {
	case "gap":
		return AckGap
	case "accept":
		return AckAccept
	case "release":
		return AckRelease
	case "reject":
		return AckReject
	case "renew":
		return AckRenew
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad ack type %q", s)
	}
	return AckType(v)
}

func fmtAcquired(got []AcquiredRecords) string {
	if len(got) == 0 {
		return "acquired none"
	}
	var b strings.Builder
	b.WriteString("acquired")
	for _, a := range got {
		fmt.Fprintf(&b, " %d-%d/%d", a.First, a.Last, a.DeliveryCount)
	}
	return b.String()
}

func fmtBatches(bs []StateBatch) string {
	if len(bs) == 0 {
		return "[]"
	}
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("%d-%d:%s/%d", b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtPartition(p *Partition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spso=%d speo=%d next-fetch=%d acquired=%d |", p.StartOffset(), p.EndOffset(), p.NextFetchOffset(), p.AcquiredCount())
	for i, r := range p.recs {
		fmt.Fprintf(&b, " %d:%s/%d", p.start+int64(i), shortState(r.state), r.count)
		if r.state == Acquired {
			fmt.Fprintf(&b, "@%s", r.member)
		}
	}
	return b.String()
}

func shortState(s RecordState) string {
	switch s {
	case Available:
		return "av"
	case Acquired:
		return "aq"
	case Acknowledged:
		return "ack"
	case Archived:
		return "arc"
	}
	return s.String()
}
