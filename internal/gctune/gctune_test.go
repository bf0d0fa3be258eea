package gctune

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentLeavesHeadroomAboveSmallHeaps(t *testing.T) {
	for _, tc := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 64 << 20, 100},        // no collection yet: the default
		{4 << 20, 64 << 20, 1600}, // 4 MiB live: next collection at 68 MiB
		{32 << 20, 64 << 20, 200}, // 32 MiB: at 96 MiB
		{64 << 20, 64 << 20, 100}, // from here on as by default
		{1 << 30, 64 << 20, 100},  // a large heap doubles, as by default
		{1, 1 << 62, 1000000},     // bounded
	} {
		if got := Percent(tc.live, tc.headroom); got != tc.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", tc.live, tc.headroom, got, tc.want)
		}
	}
}

func TestDisabledByTheEnvironment(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if Disabled(env(nil)) {
		t.Error("disabled with nothing set")
	}
	if !Disabled(env(map[string]string{"GOGC": "200"})) || !Disabled(env(map[string]string{"GOMEMLIMIT": "1GiB"})) {
		t.Error("GOGC or GOMEMLIMIT set, tuner still on")
	}
}

// TestRunRaisesThePercentForThisSmallHeap: the loop reads the live heap
// and sets the percent (a test binary's heap is a few MiB: far above
// 100), and puts nothing in place when the environment chose.
func TestRunRaisesThePercentForThisSmallHeap(t *testing.T) {
	read := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	defer debug.SetGCPercent(read())
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	debug.SetGCPercent(100)
	runtime.GC() // a live heap figure to tune from
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, 5*time.Millisecond) }()
	deadline := time.Now().Add(10 * time.Second)
	for read() <= 100 {
		if time.Now().After(deadline) {
			t.Fatal("percent never raised")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	Run(ctx, time.Millisecond) // returns at once: the operator chose
	if p := read(); p != 150 {
		t.Fatalf("percent %d after Run with GOGC=150 set", p)
	}
}
