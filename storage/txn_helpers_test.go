package storage

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

// txnBatch builds a batch of n records of producer pid at epoch and
// sequence seq, transactional when txn, values "<tag>-<i>".
func txnBatch(tb testing.TB, pid int64, epoch int16, seq int32, n int, txn bool, tag string, ts int64) []byte {
	tb.Helper()
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("%s-%d", tag, i)
	}
	return txnBatchValues(tb, pid, epoch, seq, txn, vals, ts)
}

// txnBatchValues is txnBatch with the record values given.
func txnBatchValues(tb testing.TB, pid int64, epoch int16, seq int32, txn bool, vals []string, ts int64) []byte {
	tb.Helper()
	n := len(vals)
	h := batch.Header{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
	}
	if pid < 0 {
		h.ProducerEpoch, h.BaseSequence = -1, -1
	}
	if txn {
		h.Attributes = 0x10
	}
	bl := batch.NewBuilder(h)
	for i := 0; i < n; i++ {
		bl.Add(batch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte("k"), Value: []byte(vals[i])})
	}
	b, err := bl.AppendTo(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// leader appends b as a leader at epoch 1.
func leaderAppend(tb testing.TB, l *Log, b []byte) AppendInfo {
	tb.Helper()
	info, err := l.Append(b, AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
	if err != nil {
		tb.Fatalf("Append: %v", err)
	}
	return info
}

func mustMarker(tb testing.TB, l *Log, m producer.Marker) int64 {
	tb.Helper()
	info, err := l.AppendMarker(m, 1)
	if err != nil {
		tb.Fatalf("AppendMarker(%+v): %v", m, err)
	}
	return info.FirstOffset
}

// txnIndexFiles returns, per segment base, the entries the .txnindex file
// on disk decodes to (segments without a file are left out).
func txnIndexFiles(tb testing.TB, fs vfs.FS, dir string) map[int64][]AbortedTxn {
	tb.Helper()
	names, err := fs.List(dir)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[int64][]AbortedTxn{}
	for _, n := range names {
		b, suf, ok := parseSegmentFileName(n)
		if !ok || suf != TxnIndexFileSuffix {
			continue
		}
		data, err := vfs.ReadFile(fs, dir+"/"+n, 1<<30)
		if err != nil {
			tb.Fatal(err)
		}
		e, err := DecodeTxnIndex(data)
		if err != nil {
			tb.Fatalf("%s: %v", n, err)
		}
		if len(e) > 0 {
			out[b] = e
		}
	}
	return out
}

// txnIndexMemory returns the in-memory entries per segment base.
func txnIndexMemory(l *Log) map[int64][]AbortedTxn {
	out := map[int64][]AbortedTxn{}
	for _, s := range l.segments() {
		if e := s.abortedTxns(); len(e) > 0 {
			out[s.base] = slices.Clone(e)
		}
	}
	return out
}

// allAborted returns every entry of the log's indexes, in offset order.
func allAborted(l *Log) []AbortedTxn {
	var out []AbortedTxn
	for _, s := range l.segments() {
		out = append(out, s.abortedTxns()...)
	}
	return out
}

// committedRead is what a read_committed consumer gets from the log: the
// records of [LocalLogStart, LastStableOffset) minus control batches and
// the records of aborted transactions, found the way a client does it
// (Kafka's Fetcher): the AbortedTxns of the range say, per producer, from
// which offset its transactional records are aborted until its next ABORT
// marker. It returns "offset:value" strings.
func committedRead(tb testing.TB, l *Log) []string {
	tb.Helper()
	lso := l.LastStableOffset()
	from := l.LocalLogStartOffset()
	aborted := l.AbortedTxns(from, lso)
	slices.SortFunc(aborted, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
	abortedPIDs := map[int64]bool{}
	var out []string
	for off := from; off < lso; {
		v, err := l.Read(off, 1<<20, lso)
		if err != nil {
			tb.Fatalf("Read(%d): %v", off, err)
		}
		b, err := v.Bytes()
		v.Release()
		if err != nil {
			tb.Fatal(err)
		}
		if v.Size == 0 {
			break
		}
		for rest := b; len(rest) > 0; {
			first, r, err := batch.Split(rest)
			if err != nil {
				tb.Fatal(err)
			}
			rest = r
			h, _ := batch.ParseHeader(first)
			if h.BaseOffset >= lso {
				break
			}
			for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
				abortedPIDs[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
			if h.Control() {
				m, ok, err := parseMarker(first)
				if err != nil {
					tb.Fatal(err)
				}
				if ok && !m.Commit {
					delete(abortedPIDs, h.ProducerID)
				}
				continue
			}
			if h.Transactional() && abortedPIDs[h.ProducerID] {
				continue
			}
			if err := batch.Records(first, func(rec batch.Record) error {
				out = append(out, fmt.Sprintf("%d:%s", h.BaseOffset+int64(rec.OffsetDelta), rec.Value))
				return nil
			}); err != nil {
				tb.Fatal(err)
			}
		}
		off = v.NextOffset
	}
	return out
}

// txnKeyed is keyedBatch for a transactional producer.
func txnKeyed(tb testing.TB, ops []op, ts int64, pid int64, epoch int16) []byte {
	tb.Helper()
	h := batch.Header{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, LastOffsetDelta: int32(len(ops) - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(len(ops)-1), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0,
	}
	bl := batch.NewBuilder(h)
	for i, o := range ops {
		r := batch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(o.key), Value: []byte(o.value)}
		r.ValueNull = o.del
		if o.del {
			r.Value = nil
		}
		bl.Add(r)
	}
	b, err := bl.AppendTo(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// markers returns the offsets of the log's control batches.
func markerOffsets(tb testing.TB, l *Log) []int64 {
	tb.Helper()
	var out []int64
	for _, h := range scanBatches(tb, l) {
		if h.Control() {
			out = append(out, h.BaseOffset)
		}
	}
	return out
}
