package storage

import (
	"testing"

	"github.com/strata-io/strata/storage/producer"
)

// BenchmarkLastStableOffset is the per-fetch cost of the LSO (two atomic
// loads), with transactions open.
func BenchmarkLastStableOffset(b *testing.B) {
	e := newEnv(b)
	leaderAppend(b, e.log, txnBatch(b, 1, 0, 0, 1, true, "a", baseTs))
	e.log.SetHighWatermark(e.log.LogEndOffset())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = e.log.LastStableOffset()
		}
	})
}

// BenchmarkAppendTxn compares a leader append of a 10-record batch,
// plain and transactional (the table update under the append lock), and
// a marker.
func BenchmarkAppendTxn(b *testing.B) {
	for _, kind := range []string{"plain", "transactional", "marker"} {
		b.Run("kind="+kind, func(b *testing.B) {
			e := newEnv(b, func(c *Config) { c.SegmentBytes = 1 << 30; c.SegmentIndexBytes = 10 << 20 })
			plain := txnBatch(b, -1, 0, 0, 10, false, "v", baseTs)
			txn := txnBatch(b, 7, 0, 0, 10, true, "v", baseTs)
			buf := make([]byte, len(plain))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				switch kind {
				case "plain":
					copy(buf, plain)
					_, err = e.log.Append(buf, AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
				case "transactional":
					copy(buf, txn)
					_, err = e.log.Append(buf, AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
				case "marker":
					_, err = e.log.AppendMarker(producer.Marker{ProducerID: int64(i % 64), Commit: true}, 1)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAbortedTxns is a read_committed fetch's index lookup over a
// log with an abort every 10 batches across 20 segments.
func BenchmarkAbortedTxns(b *testing.B) {
	e := newEnv(b)
	for i := range 2000 {
		pid := int64(i % 5)
		leaderAppend(b, e.log, txnBatch(b, pid, 0, 0, 1, true, "a", baseTs))
		if i%10 == 9 {
			if _, err := e.log.AppendMarker(producer.Marker{ProducerID: pid}, 1); err != nil {
				b.Fatal(err)
			}
		}
		if i%100 == 99 {
			if err := e.log.Roll(); err != nil {
				b.Fatal(err)
			}
		}
	}
	leo := e.log.LogEndOffset()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from := int64(i*37) % leo
		_ = e.log.AbortedTxns(from, from+50)
	}
}

// BenchmarkRecoverTxnReplay is an unclean reopen of a log whose active
// segment holds 50,000 small batches, plain (no transaction snapshot:
// nothing to replay) and transactional (the table replayed from the
// snapshot at the segment's base on top of the rescan), on the OS file
// system.
func BenchmarkRecoverTxnReplay(b *testing.B) {
	for _, kind := range []string{"plain", "transactional"} {
		b.Run("kind="+kind, func(b *testing.B) {
			e := newOSEnv(b, func(c *Config) { c.SegmentBytes = 1 << 30; c.SegmentIndexBytes = 10 << 20; c.IndexIntervalBytes = 4096 })
			var bufs [][]byte
			for i := range 50_000 {
				txn := kind == "transactional"
				bufs = append(bufs[:0], txnBatch(b, int64(i%50), 0, 0, 1, txn, "v", baseTs))
				leaderAppend(b, e.log, bufs[0])
				if txn && i%10 == 9 {
					if _, err := e.log.AppendMarker(producer.Marker{ProducerID: int64(i % 50), Commit: i%20 == 9}, 1); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := e.log.Flush(); err != nil {
				b.Fatal(err)
			}
			// A crash: the snapshot a clean close writes at the log end is
			// not there, the one written before the first transactional
			// batch (offset 0) is.
			crash := func() {
				for _, o := range e.log.snapshotOffsetsOf(TxnSnapshotFileSuffix) {
					if o > 0 {
						_ = e.fs.Remove(e.log.txnSnapshotPath(o))
					}
				}
			}
			e.log.Close()
			crash()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.open(false, 0, 0)
				b.StopTimer()
				e.log.Close()
				crash()
				b.StartTimer()
			}
		})
	}
}
