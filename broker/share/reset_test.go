package share

import (
	"errors"
	"testing"
	"time"
)

func TestParseAutoOffsetReset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind ResetKind
		d    time.Duration
		bad  bool
	}{
		{in: "latest", kind: ResetLatest},
		{in: "EARLIEST", kind: ResetEarliest},
		{in: "by_duration:PT1H30M", kind: ResetByDuration, d: 90 * time.Minute},
		{in: "by_duration:P1DT2.5S", kind: ResetByDuration, d: 24*time.Hour + 2500*time.Millisecond},
		{in: "by_duration:P2D", kind: ResetByDuration, d: 48 * time.Hour},
		{in: "by_duration:PT0S", kind: ResetByDuration},
		{in: "by_duration:", bad: true},
		{in: "by_duration:P", bad: true},
		{in: "by_duration:PT", bad: true},
		{in: "by_duration:-PT1H", bad: true},
		{in: "by_duration:1h", bad: true},
		{in: "none", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParseAutoOffsetReset(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrBadReset) {
				t.Errorf("%q: err = %v, want ErrBadReset", tc.in, err)
			}
			continue
		}
		if err != nil || got.Kind != tc.kind || got.Duration != tc.d {
			t.Errorf("%q: got %+v, %v; want kind %d duration %v", tc.in, got, err, tc.kind, tc.d)
		}
	}
}

func TestAutoOffsetResetStartOffset(t *testing.T) {
	// A log 10..100 whose record o has timestamp 1000*o.
	lookup := func(ts int64) (int64, bool) {
		o := (ts + 999) / 1000
		if o >= 100 {
			return 0, false
		}
		return o, true
	}
	hour, _ := ParseAutoOffsetReset("by_duration:PT10S")
	for _, tc := range []struct {
		name string
		r    AutoOffsetReset
		now  int64
		want int64
	}{
		{"earliest", AutoOffsetReset{Kind: ResetEarliest}, 0, 10},
		{"latest", AutoOffsetReset{Kind: ResetLatest}, 0, 100},
		{"by_duration inside", hour, 60_000, 50},
		{"by_duration before the log start", hour, 12_000, 10},
		{"by_duration past the end", hour, 200_000, 100},
	} {
		if got := tc.r.StartOffset(10, 100, tc.now, lookup); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []Config{
		{LockDurationMs: 999, DeliveryCountLimit: 5, MaxRecordLocks: 2000},
		{LockDurationMs: 3600001, DeliveryCountLimit: 5, MaxRecordLocks: 2000},
		{LockDurationMs: 30000, DeliveryCountLimit: 1, MaxRecordLocks: 2000},
		{LockDurationMs: 30000, DeliveryCountLimit: 11, MaxRecordLocks: 2000},
		{LockDurationMs: 30000, DeliveryCountLimit: 5, MaxRecordLocks: 99},
		{LockDurationMs: 30000, DeliveryCountLimit: 5, MaxRecordLocks: 10001},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
