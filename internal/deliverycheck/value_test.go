package deliverycheck

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValueRoundTripAndTamper(t *testing.T) {
	v := EncodeValue("run1.p0", 42, "xxxx")
	if !strings.HasSuffix(v, " run1.p0 00000042 xxxx") {
		t.Fatalf("EncodeValue = %q", v)
	}
	if p, seq, err := ParseValue(v); p != "run1.p0" || seq != 42 || err != nil {
		t.Fatalf("ParseValue = %q, %d, %v", p, seq, err)
	}
	if p, seq, err := ParseValue(EncodeValue("q", 7, "")); p != "q" || seq != 7 || err != nil {
		t.Fatalf("ParseValue(unpadded) = %q, %d, %v", p, seq, err)
	}
	if err := VerifyValue(v); err != nil {
		t.Fatalf("VerifyValue(%q) = %v", v, err)
	}
	for _, bad := range []string{
		v[:len(v)-1] + "y",                // padding rewritten
		strings.Replace(v, "42", "43", 1), // sequence rewritten
		v[:len(v)-1],                      // truncated
		"run1.p0 00000042",                // no checksum at all
		"zzzzzzzz run1.p0 00000042",       // not hex
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

// TestCheckReordered: an idempotent producer's acknowledged records land
// in one partition in the order it sent them; a later sequence at a lower
// offset is reordered. Other producers and other partitions are
// independent, and an unacknowledged send orders nothing.
func TestCheckReordered(t *testing.T) {
	v := func(p string, seq int64) string { return EncodeValue(p, seq, "") }
	h := History{
		Sends: []Send{
			ok(v("a", 0), 0, 0), ok(v("a", 1), 0, 2), ok(v("a", 2), 0, 1), // a: 2 before 1 in p0
			ok(v("a", 3), 1, 0), ok(v("b", 0), 1, 1), ok(v("b", 1), 1, 2), // p1 in order
			ok(v("b", 2), 0, 3), unknown(v("b", 3)), ok(v("b", 4), 0, 4),
		},
		Final: []Poll{fin(0, 0, v("a", 0)), fin(0, 1, v("a", 2)), fin(0, 2, v("a", 1)), fin(0, 3, v("b", 2)), fin(0, 4, v("b", 4)),
			fin(1, 0, v("a", 3)), fin(1, 1, v("b", 0)), fin(1, 2, v("b", 1))},
		FinalEnds:   map[int32]int64{0: 5, 1: 3},
		Idempotent:  true,
		Checksummed: true,
	}
	r := Check(h)
	want := []string{"reordered:0@1:" + strings.Join(sorted(v("a", 1), v("a", 2)), ",")}
	if got := anomalies(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("anomalies\n got %q\nwant %q", got, want)
	}
	if d := r.Of(Reordered)[0].Detail; !strings.Contains(d, "producer a") || r.Err() == nil {
		t.Fatalf("detail %q, Err %v", d, r.Err())
	}
}
