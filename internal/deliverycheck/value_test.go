package deliverycheck

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValueRoundTripAndTamper(t *testing.T) {
	v := EncodeValue("run1.p0", 42, "xxxx")
	if !strings.HasSuffix(v, " run1.p0-00000042xxxx") {
		t.Fatalf("EncodeValue = %q", v)
	}
	if err := VerifyValue(v); err != nil {
		t.Fatalf("VerifyValue(%q) = %v", v, err)
	}
	for _, bad := range []string{
		v[:len(v)-1] + "y",                // padding rewritten
		strings.Replace(v, "42", "43", 1), // sequence rewritten
		v[:len(v)-1],                      // truncated
		"run1.p0-00000042",                // no checksum at all
		"zzzzzzzz run1.p0-00000042",       // not hex
		"",
	} {
		if err := VerifyValue(bad); !errors.Is(err, ErrChecksum) {
			t.Errorf("VerifyValue(%q) = %v, want ErrChecksum", bad, err)
		}
	}
}

// TestCheckCorrupt: with checksummed values, a value read whose bytes
// differ from what was produced is its own anomaly (besides the
// inconsistent offset and the loss of the original it implies); without
// Checksummed nothing is verified.
func TestCheckCorrupt(t *testing.T) {
	a, b := EncodeValue("p", 0, ""), EncodeValue("p", 1, "")
	bad := b[:len(b)-1] + "9"
	h := History{
		Sends:       []Send{ok(a, 0, 0), ok(b, 0, 1)},
		Polls:       []Poll{poll("c1", 1, 0, 0, a), poll("c1", 1, 0, 1, bad)},
		Final:       []Poll{fin(0, 0, a), fin(0, 1, bad)},
		FinalEnds:   map[int32]int64{0: 2},
		Idempotent:  true,
		Checksummed: true,
	}
	r := Check(h)
	want := []string{"corrupt:0@1:" + bad, "inconsistent-offset:0@1:" + strings.Join(sorted(b, bad), ","), "lost:0@1:" + b}
	if got := anomalies(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("anomalies\n got %q\nwant %q", got, want)
	}
	if r.Count(Corrupt) != 1 || !strings.Contains(r.Of(Corrupt)[0].Detail, "checksum") {
		t.Fatalf("corrupt: %v", r.Of(Corrupt))
	}
	if err := r.Err(); !errors.Is(err, ErrAnomalies) || !strings.Contains(r.Summary(), "corrupt 1") {
		t.Fatalf("Err() = %v, summary %s", err, r.Summary())
	}
	h.Checksummed = false
	if r := Check(h); r.Count(Corrupt) != 0 {
		t.Fatalf("unchecksummed history verified: %v", r.Of(Corrupt))
	}
}

func sorted(a, b string) []string {
	if b < a {
		return []string{b, a}
	}
	return []string{a, b}
}
