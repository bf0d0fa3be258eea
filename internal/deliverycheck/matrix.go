package deliverycheck

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"
)

// FaultResult is one row of the fault matrix (issue 14): a fault, how
// many times it was injected, what the checker found, and how long the
// cluster took to elect a new leader (fault → new leader in metadata)
// and to bring the ISR back to every replica once the fault ended (heal,
// restart, resume → full ISR: from the fault itself it would add however
// long the test kept the fault in place).
type FaultResult struct {
	Fault        string          `json:"fault"`
	Runs         int             `json:"runs"`
	Acked        int             `json:"acked"`
	Lost         int             `json:"lost"`
	Duplicates   int             `json:"duplicates"`
	Inconsistent int             `json:"inconsistent"`
	Other        int             `json:"other"` // every other failing anomaly
	Reelection   []time.Duration `json:"reelection_ns"`
	ISRRecovery  []time.Duration `json:"isr_recovery_ns"`
}

// Add counts a checked run's report into r (Runs is the caller's: one
// run may inject several faults).
func (r *FaultResult) Add(rep *Report) {
	r.Acked += rep.Acked
	r.Lost += rep.Count(Lost)
	r.Duplicates += rep.Count(Duplicate)
	r.Inconsistent += rep.Count(InconsistentOffset)
	r.Other += rep.Count(OffsetReused) + rep.Count(NonmonotonicPoll) + rep.Count(PollSkip) + rep.Count(G1a) +
		rep.Count(Corrupt) + rep.Count(Reordered)
}

// Merge adds o's counts and timings to r.
func (r *FaultResult) Merge(o FaultResult) {
	r.Runs += o.Runs
	r.Acked += o.Acked
	r.Lost += o.Lost
	r.Duplicates += o.Duplicates
	r.Inconsistent += o.Inconsistent
	r.Other += o.Other
	r.Reelection = append(r.Reelection, o.Reelection...)
	r.ISRRecovery = append(r.ISRRecovery, o.ISRRecovery...)
}

// MatrixHeader is the markdown header of [FaultResult.Row].
func MatrixHeader() string {
	return "| fault | runs | acknowledged | lost | duplicates | inconsistent offsets | other anomalies | re-election p50 / p99 | ISR recovery p50 / p99 |\n" +
		"|---|---|---|---|---|---|---|---|---|"
}

// Row is r as a markdown table row.
func (r *FaultResult) Row() string {
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %s | %s |", r.Fault, r.Runs, r.Acked, r.Lost, r.Duplicates,
		r.Inconsistent, r.Other, pcts(r.Reelection), pcts(r.ISRRecovery))
}

func pcts(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	return fmt.Sprintf("%v / %v", Percentile(ds, 50).Round(time.Millisecond), Percentile(ds, 99).Round(time.Millisecond))
}

// Percentile is the p-th percentile (nearest rank) of ds; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Save appends r as one JSON line to path (nothing when path is ""), for
// bench/faults to gather into the matrix.
func (r *FaultResult) Save(path string) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
