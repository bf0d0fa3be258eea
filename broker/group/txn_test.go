package group

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
)

// txnHarness drives a Store's transactional offsets through datadriven
// scripts (testdata/txn), playing the broker: a memLog per partition,
// markers appended to it, completions, loads and reloads.
//
//	commit g=G tp=T/P off=N [fail-after]       plain OffsetCommit
//	txn pid=N g=G tp=T/P off=N [tp=… off=…] [fail-after]   TxnOffsetCommit
//	marker pid=N commit|abort                  marker appended, then CompleteTxn
//	marker-log pid=N commit|abort              marker appended only (no completion)
//	complete pid=N commit|abort                CompleteTxn at the log end
//	delete g=G tp=T/P                          OffsetDelete
//	delete-group g=G                           DeleteGroup
//	expire now=MS retention=MS                 ExpireOffsets (every group expirable)
//	reload                                     a new store loads the whole log
//	load                                       a new store starts a load (end = log end now)
//	replay [n=K]                               the load replays K (all) more batches up to its end
//	finish                                     the load finishes
//	state                                      committed and pending offsets
//	log                                        the log's batches
type txnHarness struct {
	t      *testing.T
	ml     *memLog
	s      *Store
	now    int64
	loader *Loader
	loadAt int // next batch the load replays
	loadTo int // the load's end
}

const txnPart = int32(3)

func TestStoreTxnOffsets(t *testing.T) {
	datadriven.Walk(t, "testdata/txn", func(t *testing.T, path string) {
		h := &txnHarness{ml: &memLog{}, now: 1000}
		h.s = NewStore(StoreOptions{Append: h.ml.append, Now: h.clock})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			out, err := h.run(d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

func (h *txnHarness) clock() time.Time { return time.UnixMilli(h.now) }

func argTP(s string) TopicPartition {
	t, p, _ := strings.Cut(s, "/")
	n, _ := strconv.Atoi(p)
	return TopicPartition{Topic: t, Partition: int32(n)}
}

func (h *txnHarness) run(d *datadriven.TestData) (string, error) {
	ctx := context.Background()
	arg := func(k string) string {
		for _, a := range d.CmdArgs {
			if a.Key == k && len(a.Vals) > 0 {
				return a.Vals[0]
			}
		}
		return ""
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(arg(k), 10, 64); return n }
	commits := func() []Commit {
		var out []Commit
		var tps, offs []string
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "tp":
				tps = append(tps, a.Vals...)
			case "off":
				offs = append(offs, a.Vals...)
			}
		}
		for i, tp := range tps {
			o, _ := strconv.ParseInt(offs[i], 10, 64)
			out = append(out, Commit{argTP(tp), Offset{Offset: o, LeaderEpoch: -1, CommitTimestamp: h.now, ExpireTimestamp: -1}})
		}
		return out
	}
	failAfter := func() func() {
		if d.HasArg("fail-after") {
			h.ml.failAfter = fmt.Errorf("lost leadership: %w", kerr.NotLeaderForPartition)
		}
		return func() { h.ml.failAfter = nil }
	}
	switch d.Cmd {
	case "commit":
		defer failAfter()()
		return "", h.s.Commit(ctx, txnPart, arg("g"), commits())
	case "txn":
		defer failAfter()()
		return "", h.s.CommitTxn(ctx, txnPart, arg("g"), num("pid"), int16(num("epoch")), commits())
	case "marker", "marker-log":
		at := h.appendMarker(num("pid"), d.HasArg("commit"))
		if d.Cmd == "marker" {
			h.s.CompleteTxn(txnPart, num("pid"), d.HasArg("commit"), h.ml.next[txnPart])
		}
		return fmt.Sprintf("marker at %d\n", at), nil
	case "complete":
		h.s.CompleteTxn(txnPart, num("pid"), d.HasArg("commit"), h.ml.next[txnPart])
		return "", nil
	case "delete":
		return "", h.s.DeleteOffsets(ctx, txnPart, arg("g"), []TopicPartition{argTP(arg("tp"))})
	case "delete-group":
		return "", h.s.DeleteGroup(ctx, txnPart, arg("g"))
	case "expire":
		h.now = num("now")
		n, emptied, err := h.s.ExpireOffsets(ctx, time.Duration(num("retention"))*time.Millisecond, func(string, string) bool { return true })
		return fmt.Sprintf("expired %d emptied %v\n", n, emptied), err
	case "reload":
		s, _ := h.ml.reload(h.t, txnPart, h.clock)
		h.s = s
		return h.state(), nil
	case "load":
		h.s = NewStore(StoreOptions{Append: h.ml.append, Now: h.clock})
		h.loader = NewLoader(h.s, txnPart)
		h.loadAt, h.loadTo = 0, len(h.ml.batches[txnPart])
		return "", nil
	case "replay":
		k := h.loadTo - h.loadAt
		if d.HasArg("n") {
			k = int(num("n"))
		}
		for ; k > 0 && h.loadAt < h.loadTo; k-- {
			if err := h.loader.Batch(h.ml.batches[txnPart][h.loadAt]); err != nil {
				return "", err
			}
			h.loadAt++
		}
		return "", nil
	case "finish":
		if h.loadAt != h.loadTo {
			return "", errors.New("load not replayed to its end")
		}
		h.loader.Finish(func(int32, GroupSnapshot) {})
		h.loader = nil
		return h.state(), nil
	case "state":
		return h.state(), nil
	case "log":
		var b strings.Builder
		for _, raw := range h.ml.batches[txnPart] {
			bh, _ := batch.ParseHeader(raw)
			kind := "plain"
			switch {
			case bh.Control():
				kind = "control"
			case bh.Transactional():
				kind = "txn"
			}
			fmt.Fprintf(&b, "%d-%d %s pid=%d epoch=%d seq=%d\n", bh.BaseOffset, bh.LastOffset(), kind, bh.ProducerID, bh.ProducerEpoch, bh.BaseSequence)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

// appendMarker appends a COMMIT or ABORT control batch of pid to the log,
// as the partition's leader does, and returns its offset.
func (h *txnHarness) appendMarker(pid int64, commit bool) int64 {
	k := kmsg.NewControlRecordKey()
	k.Type = kmsg.ControlRecordKeyTypeAbort
	if commit {
		k.Type = kmsg.ControlRecordKeyTypeCommit
	}
	v := kmsg.NewEndTxnMarker()
	r := kmsg.Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
	enc := r.AppendTo(nil)
	r.Length = int32(len(enc) - 1)
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x30, FirstTimestamp: h.now, MaxTimestamp: h.now,
		ProducerID: pid, ProducerEpoch: 0, FirstSequence: -1, NumRecords: 1, Records: r.AppendTo(nil)}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], batch.Checksum(out))
	h.ml.mu.Lock()
	defer h.ml.mu.Unlock()
	if h.ml.batches == nil {
		h.ml.batches, h.ml.next = map[int32][][]byte{}, map[int32]int64{}
	}
	at := h.ml.next[txnPart]
	binary.BigEndian.PutUint64(out, uint64(at))
	h.ml.batches[txnPart] = append(h.ml.batches[txnPart], out)
	h.ml.next[txnPart]++
	return at
}

// state prints the committed offsets (with their record offsets), then
// the pending ones per producer, sorted.
func (h *txnHarness) state() string {
	s := h.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	var lines []string
	for g, m := range s.offsets {
		for tp, r := range m {
			lines = append(lines, fmt.Sprintf("committed %s %s/%d = %d (record %d)", g, tp.Topic, tp.Partition, r.Offset.Offset, r.at))
		}
	}
	for p, byPID := range s.pending {
		for pid, byGroup := range byPID {
			for g, m := range byGroup {
				for tp, r := range m {
					lines = append(lines, fmt.Sprintf("pending p%d pid=%d %s %s/%d = %d (record %d)", p, pid, g, tp.Topic, tp.Partition, r.Offset.Offset, r.at))
				}
			}
		}
	}
	if len(lines) == 0 {
		return "empty\n"
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
