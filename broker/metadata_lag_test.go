package broker

import (
	"testing"
	"time"
)

// TestMetadataLagTellsStuckFromBusy: the heartbeat loop reopens the
// metadata stream only when the view stays below the offset the
// controller leader had when the view was first seen behind, for longer
// than the timeout; a view that keeps up with a busy log (the leader
// always a little ahead) never triggers it, nor does a controller that
// does not say its offset (0).
func TestMetadataLagTellsStuckFromBusy(t *testing.T) {
	const timeout = 2 * time.Second
	t0 := time.Unix(1000, 0)
	type beat struct {
		at              time.Duration
		applied, leader int64
		reopen          bool
	}
	for _, tc := range []struct {
		name  string
		beats []beat
	}{
		{"caught up", []beat{{0, 10, 10, false}, {3 * time.Second, 10, 10, false}}},
		{"old controller says nothing", []beat{{0, 10, 0, false}, {5 * time.Second, 10, 0, false}}},
		{"stuck: reopened after the timeout, then starts over", []beat{
			{0, 10, 12, false}, {time.Second, 10, 12, false}, {2 * time.Second, 10, 13, false},
			{2100 * time.Millisecond, 10, 13, true},
			{2200 * time.Millisecond, 10, 13, false}, // a new period from here
			{4 * time.Second, 10, 13, false},
			{4300 * time.Millisecond, 10, 14, true},
		}},
		{"busy but keeping up: the leader always ahead", []beat{
			{0, 10, 12, false}, {time.Second, 12, 15, false}, {2 * time.Second, 15, 18, false},
			{3 * time.Second, 18, 21, false}, {4 * time.Second, 21, 24, false}, {5 * time.Second, 24, 27, false},
		}},
		{"progressing too slowly: below the first target past the timeout", []beat{
			{0, 10, 20, false}, {time.Second, 15, 25, false}, {2100 * time.Millisecond, 19, 30, true},
		}},
	} {
		var l metadataLag
		for i, b := range tc.beats {
			if got := l.observe(t0.Add(b.at), b.applied, b.leader, timeout); got != b.reopen {
				t.Errorf("%s: beat %d (%v applied %d leader %d): reopen %v, want %v", tc.name, i, b.at, b.applied, b.leader, got, b.reopen)
			}
		}
	}
}
