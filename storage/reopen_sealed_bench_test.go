package storage_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/storage"
)

// BenchmarkReopenSealedConstantTs measures a clean OpenLog of a 1 GiB log
// held in one sealed segment (rolled, then an empty active one) whose
// batches all carry the same timestamp. The time index then holds one
// entry at the segment's start; before seal's final entry was trusted,
// every clean reopen rescanned the whole segment to find its max timestamp.
//
//	go test -run '^$' -bench 'ReopenSealedConstantTs' -benchtime 3x ./storage
func BenchmarkReopenSealedConstantTs(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1 GiB log")
	}
	dir := filepath.Join(b.TempDir(), "bench-0")
	l := openBenchLog(b, benchLogOptions(dir))
	bt := benchBatch(b)
	restamp(bt, benchBaseTs)
	for l.Size()+int64(len(bt)) <= 1<<30 {
		if _, err := l.Append(bt, storage.AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	leo := l.LogEndOffset()
	wantOff, wantTs := l.MaxTimestampOffset()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	o := benchLogOptions(dir)
	o.CleanShutdown, o.RecoveryPoint = true, leo
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		cpu0 := cpuTime(b)
		l := openBenchLog(b, o)
		cpu += cpuTime(b) - cpu0
		b.StopTimer()
		if got := l.LogEndOffset(); got != leo || l.NumSegments() != 2 {
			b.Fatalf("reopened at log end %d with %d segments, want %d with 2", got, l.NumSegments(), leo)
		}
		if off, ts := l.MaxTimestampOffset(); off != wantOff || ts != wantTs {
			b.Fatalf("max timestamp after reopen %d@%d, want %d@%d", ts, off, wantTs, wantOff)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}
