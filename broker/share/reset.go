package share

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ResetKind is the strategy of share.auto.offset.reset.
type ResetKind int8

// The strategies (Kafka's ShareGroupAutoOffsetResetStrategy).
const (
	ResetLatest ResetKind = iota // Kafka's default
	ResetEarliest
	ResetByDuration
)

// AutoOffsetReset is a parsed share.auto.offset.reset value: "earliest",
// "latest" or "by_duration:<ISO-8601 duration>" (e.g. by_duration:PT1H30M,
// by_duration:P1DT2.5S; Java's Duration.parse forms, no sign).
type AutoOffsetReset struct {
	Kind     ResetKind
	Duration time.Duration
}

// ErrBadReset is returned by [ParseAutoOffsetReset]; the config handler
// answers it as INVALID_CONFIG.
var ErrBadReset = errors.New("share: invalid share.auto.offset.reset")

var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,9}))?S)?)?$`)

// ParseAutoOffsetReset parses a share.auto.offset.reset value
// (case-insensitive strategy names, as Kafka's validator).
func ParseAutoOffsetReset(s string) (AutoOffsetReset, error) {
	low := strings.ToLower(strings.TrimSpace(s))
	switch low {
	case "latest":
		return AutoOffsetReset{Kind: ResetLatest}, nil
	case "earliest":
		return AutoOffsetReset{Kind: ResetEarliest}, nil
	}
	rest, ok := strings.CutPrefix(low, "by_duration:")
	if !ok {
		return AutoOffsetReset{}, fmt.Errorf("%w: %q", ErrBadReset, s)
	}
	m := isoDuration.FindStringSubmatch(strings.ToUpper(rest))
	if m == nil || rest == "p" || strings.HasSuffix(strings.ToUpper(rest), "T") {
		return AutoOffsetReset{}, fmt.Errorf("%w: %q is not an ISO-8601 duration", ErrBadReset, s)
	}
	var d time.Duration
	units := []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second}
	for i, u := range units {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(1<<62)/int64(u) {
			return AutoOffsetReset{}, fmt.Errorf("%w: %q is too long", ErrBadReset, s)
		}
		d += time.Duration(n) * u
	}
	if m[5] != "" {
		frac := m[5] + strings.Repeat("0", 9-len(m[5]))
		n, _ := strconv.ParseInt(frac, 10, 64)
		d += time.Duration(n)
	}
	if d < 0 {
		return AutoOffsetReset{}, fmt.Errorf("%w: %q is too long", ErrBadReset, s)
	}
	return AutoOffsetReset{Kind: ResetByDuration, Duration: d}, nil
}

// StartOffset is the initial SPSO of a share-partition that has no durable
// state: the log start for earliest, the log end for latest, and for
// by_duration the first offset whose timestamp is at or after now-Duration,
// which offsetForTime answers as ListOffsets does (ok false: no such
// record, then the log end).
func (r AutoOffsetReset) StartOffset(logStart, logEnd, nowMs int64, offsetForTime func(tsMs int64) (int64, bool)) int64 {
	switch r.Kind {
	case ResetEarliest:
		return logStart
	case ResetByDuration:
		if offsetForTime != nil {
			if o, ok := offsetForTime(nowMs - r.Duration.Milliseconds()); ok {
				return min(max(o, logStart), logEnd)
			}
		}
	}
	return logEnd
}
