package controller

import (
	"slices"
	"testing"
	"time"
)

func TestLivenessResetGivesFreshSessions(t *testing.T) {
	l := newLiveness(100 * time.Millisecond)
	now := time.Now()
	if got := l.expired([]int32{1, 2}, now); len(got) != 0 {
		t.Fatalf("unseen brokers expired at once: %v", got)
	}
	l.touchAt(2, now.Add(100*time.Millisecond))
	if got := l.expired([]int32{1, 2}, now.Add(150*time.Millisecond)); !slices.Equal(got, []int32{1}) {
		t.Fatalf("expired %v, want [1]", got)
	}
	// Leadership changed: every session starts again from the first check.
	l.reset()
	if got := l.expired([]int32{1, 2}, now.Add(time.Second)); len(got) != 0 {
		t.Fatalf("after reset expired %v, want none", got)
	}
	if got := l.expired([]int32{1, 2}, now.Add(time.Second+150*time.Millisecond)); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("fresh sessions did not expire: %v", got)
	}
	if !l.alive(3) {
		t.Fatal("a broker never heard from by this leader counts as alive")
	}
}
