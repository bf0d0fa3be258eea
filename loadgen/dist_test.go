package loadgen

import (
	"math"
	"strings"
	"testing"
)

func TestSizeFixed(t *testing.T) {
	s, err := NewSizeSampler(SizeDist{Kind: "fixed", Size: "1KiB"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if n := s.Next(); n != 1024 {
			t.Fatalf("fixed 1KiB drew %d", n)
		}
	}
	if s.Max() != 1024 {
		t.Fatalf("max %d", s.Max())
	}
}

func TestSizeUniformWithinBoundsAndMean(t *testing.T) {
	s, err := NewSizeSampler(SizeDist{Kind: "uniform", Min: "100", Max: "300"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200000
	var sum float64
	seenMin, seenMax := false, false
	for range n {
		v := s.Next()
		if v < 100 || v > 300 {
			t.Fatalf("uniform drew %d outside [100, 300]", v)
		}
		seenMin = seenMin || v == 100
		seenMax = seenMax || v == 300
		sum += float64(v)
	}
	if mean := sum / n; math.Abs(mean-200) > 1 {
		t.Fatalf("mean %.2f, want 200 ± 1", mean)
	}
	if !seenMin || !seenMax {
		t.Fatal("the bounds are never drawn: the range is not inclusive")
	}
}

func TestSizeNormalClampedWithMean(t *testing.T) {
	s, err := NewSizeSampler(SizeDist{Kind: "normal", Mean: "1000", Stddev: "200", Min: "600", Max: "1400"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200000
	var sum, sq float64
	clampedLow := 0
	for range n {
		v := s.Next()
		if v < 600 || v > 1400 {
			t.Fatalf("normal drew %d outside [600, 1400]", v)
		}
		if v == 600 {
			clampedLow++
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-1000) > 3 {
		t.Fatalf("mean %.2f, want 1000 ± 3", mean)
	}
	// Clamping at ±2σ trims the spread a little below 200.
	if sd < 170 || sd > 200 {
		t.Fatalf("stddev %.1f, want 170..200", sd)
	}
	// P(X < -2σ) ≈ 2.3%.
	if f := float64(clampedLow) / n; f < 0.015 || f > 0.03 {
		t.Fatalf("%.3f of draws clamped to min, want ≈0.023", f)
	}
}

func TestSizeRejectsBadDistributions(t *testing.T) {
	for _, d := range []SizeDist{
		{Kind: "fixed"},
		{Kind: "fixed", Size: "4"}, // below the 8-byte timestamp
		{Kind: "fixed", Size: "lots"},
		{Kind: "uniform", Min: "100"},
		{Kind: "uniform", Min: "300", Max: "100"},
		{Kind: "normal", Mean: "100"},
		{Kind: "normal", Mean: "100", Stddev: "10", Min: "200"},
		{Kind: "pareto", Size: "1KiB"},
	} {
		if _, err := NewSizeSampler(d, 1); err == nil || !strings.HasPrefix(err.Error(), "loadgen: ") {
			t.Errorf("%+v: err %v, want a loadgen error", d, err)
		}
	}
}

func TestKeysRoundRobinCycle(t *testing.T) {
	g, err := NewKeyGen("round-robin", 5, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 23 {
		if got := g.NextIndex(); got != int64(i%5) {
			t.Fatalf("draw %d: key %d, want %d", i, got, i%5)
		}
	}
	if k := string(g.AppendKey(nil)); k != "k3" {
		t.Fatalf("key %q, want k3", k)
	}
}

func TestKeysNone(t *testing.T) {
	g, _ := NewKeyGen("none", 10, 0, 1)
	if k := g.AppendKey([]byte("stale")); k != nil {
		t.Fatalf("none gave key %q", k)
	}
}

// TestKeysUniformChiSquare: 100 keys, 100000 draws; the chi-square
// statistic (99 degrees of freedom) stays below 160 (p ≈ 0.0001) for a
// fixed seed.
func TestKeysUniformChiSquare(t *testing.T) {
	const space, n = 100, 100000
	g, _ := NewKeyGen("uniform", space, 0, 42)
	counts := make([]float64, space)
	for range n {
		i := g.NextIndex()
		if i < 0 || i >= space {
			t.Fatalf("key %d outside [0, %d)", i, space)
		}
		counts[i]++
	}
	exp := float64(n) / space
	var chi float64
	for _, c := range counts {
		chi += (c - exp) * (c - exp) / exp
	}
	if chi > 160 {
		t.Fatalf("chi-square %.1f over 99 dof: not uniform", chi)
	}
}

func TestKeysZipfSkewed(t *testing.T) {
	const space, n = 1000, 100000
	g, err := NewKeyGen("zipf", space, 1.1, 9)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, space)
	for range n {
		i := g.NextIndex()
		if i < 0 || i >= space {
			t.Fatalf("key %d outside [0, %d)", i, space)
		}
		counts[i]++
	}
	if counts[0] <= counts[9] || counts[9] <= counts[99] {
		t.Fatalf("rank 1: %d, rank 10: %d, rank 100: %d; want decreasing", counts[0], counts[9], counts[99])
	}
	// Zipf(s=1.1, v=1): P(0)/P(9) = 10^1.1 ≈ 12.6.
	if r := float64(counts[0]) / float64(counts[9]); r < 9 || r > 17 {
		t.Fatalf("rank-1/rank-10 frequency ratio %.1f, want ≈12.6", r)
	}
	if _, err := NewKeyGen("zipf", space, 1.0, 1); err == nil {
		t.Fatal("zipf s=1 accepted")
	}
	if _, err := NewKeyGen("hash", space, 0, 1); err == nil {
		t.Fatal("unknown key kind accepted")
	}
}
