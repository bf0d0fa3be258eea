package deliverycheck

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ok(v string, p int32, o int64) Send {
	return Send{Value: v, Status: SendOK, Partition: p, Offset: o}
}
func failed(v string) Send  { return Send{Value: v, Status: SendFailed, Err: "boom"} }
func unknown(v string) Send { return Send{Value: v, Status: SendUnknown, Err: "timeout"} }
func poll(c string, g int32, p int32, o int64, v string) Poll {
	return Poll{Consumer: c, Generation: g, Partition: p, Offset: o, Value: v}
}
func fin(p int32, o int64, v string) Poll { return Poll{Partition: p, Offset: o, Value: v} }

// want is an expected anomaly, written kind:partition@offset:value[,value].
func anomalies(r *Report) []string {
	var out []string
	for _, a := range r.Anomalies {
		out = append(out, fmt.Sprintf("%s:%d@%d:%s", a.Kind, a.Partition, a.Offset, strings.Join(a.Values, ",")))
	}
	return out
}

func TestCheckFindsEachAnomaly(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    History
		want []string
		fail bool // Report.Err is not nil
	}{{
		name: "clean history with a final read",
		h: History{
			Sends:     []Send{ok("a", 0, 0), ok("b", 0, 1), ok("c", 1, 0), unknown("d"), failed("e")},
			Polls:     []Poll{poll("c1", 1, 0, 0, "a"), poll("c1", 1, 0, 1, "b"), poll("c1", 1, 1, 0, "c")},
			Final:     []Poll{fin(0, 0, "a"), fin(0, 1, "b"), fin(0, 2, "d"), fin(1, 0, "c")},
			FinalEnds: map[int32]int64{0: 3, 1: 1}, Idempotent: true,
		},
	}, {
		name: "an unknown send may be absent",
		h: History{
			Sends: []Send{ok("a", 0, 0), unknown("b")}, Final: []Poll{fin(0, 0, "a")}, FinalEnds: map[int32]int64{0: 1},
		},
	}, {
		name: "lost: acknowledged, absent from the final read",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 1), ok("c", 0, 2)},
			Final: []Poll{fin(0, 0, "a"), fin(0, 1, "c")}, FinalEnds: map[int32]int64{0: 2},
		},
		// c acknowledged at 2 but read at 1: the log reused b's offset.
		want: []string{"duplicate:0@1:c", "inconsistent-offset:0@1:b,c", "lost:0@1:b"},
		fail: true,
	}, {
		name: "lost: the log ends below an acknowledged offset (truncated tail)",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 1)},
			Final: []Poll{fin(0, 0, "a")}, FinalEnds: map[int32]int64{0: 1},
		},
		want: []string{"lost:0@1:b"},
		fail: true,
	}, {
		name: "lost without a final read: a later offset was read (Jepsen lost-write)",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 1), ok("c", 0, 2)},
			Polls: []Poll{poll("c1", 1, 0, 0, "a"), poll("c2", 1, 0, 2, "c")},
		},
		want: []string{"lost:0@1:b"},
		fail: true,
	}, {
		name: "unseen: acknowledged, not read, nothing later read, no final read",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 1)},
			Polls: []Poll{poll("c1", 1, 0, 0, "a")},
		},
		want: []string{"unseen:0@1:b"},
	}, {
		name: "duplicate with idempotence fails",
		h: History{
			Sends: []Send{ok("a", 0, 0), unknown("b")},
			Final: []Poll{fin(0, 0, "a"), fin(0, 1, "b"), fin(0, 2, "b")}, FinalEnds: map[int32]int64{0: 3},
			Idempotent: true,
		},
		want: []string{"duplicate:0@1:b"},
		fail: true,
	}, {
		name: "duplicate without idempotence is only reported",
		h: History{
			Sends: []Send{ok("a", 0, 0), unknown("b")},
			Final: []Poll{fin(0, 0, "a"), fin(0, 1, "b"), fin(0, 2, "b")}, FinalEnds: map[int32]int64{0: 3},
		},
		want: []string{"duplicate:0@1:b"},
	}, {
		name: "duplicate: acknowledged at one offset, read at another",
		h: History{
			Sends: []Send{ok("a", 0, 5)},
			Final: []Poll{fin(0, 5, "a"), fin(0, 6, "a")}, FinalEnds: map[int32]int64{0: 7},
		},
		want: []string{"duplicate:0@5:a"},
	}, {
		name: "duplicate across partitions",
		h: History{
			Sends: []Send{ok("a", 0, 0)},
			Final: []Poll{fin(0, 0, "a"), fin(1, 0, "a")}, FinalEnds: map[int32]int64{0: 1, 1: 1},
			Idempotent: true,
		},
		want: []string{"duplicate:0@0:a"},
		fail: true,
	}, {
		name: "inconsistent offset: two consumers (two replicas) read different values at one offset",
		h: History{
			Sends: []Send{unknown("x"), unknown("y")},
			Polls: []Poll{poll("c1", 1, 0, 3, "x"), poll("c2", 1, 0, 3, "y")},
		},
		want: []string{"inconsistent-offset:0@3:x,y"},
		fail: true,
	}, {
		name: "offset reused: two sends acknowledged at one offset",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 0)},
			Final: []Poll{fin(0, 0, "b")}, FinalEnds: map[int32]int64{0: 1},
		},
		want: []string{"lost:0@0:a", "offset-reused:0@0:a,b"},
		fail: true,
	}, {
		name: "nonmonotonic poll within one generation",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 1)},
			Polls: []Poll{poll("c1", 1, 0, 0, "a"), poll("c1", 1, 0, 1, "b"), poll("c1", 1, 0, 0, "a")},
		},
		want: []string{"nonmonotonic-poll:0@0:a"},
		fail: true,
	}, {
		name: "rereading after a new assignment generation is fine",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 1)},
			Polls: []Poll{poll("c1", 1, 0, 0, "a"), poll("c1", 1, 0, 1, "b"), poll("c1", 2, 0, 0, "a"), poll("c1", 2, 0, 1, "b")},
		},
	}, {
		name: "poll skip over a known offset within one generation",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("b", 0, 1), ok("c", 0, 2)},
			Polls: []Poll{poll("c1", 1, 0, 0, "a"), poll("c1", 1, 0, 2, "c"), poll("c2", 1, 0, 1, "b")},
		},
		want: []string{"poll-skip:0@1:c"},
		fail: true,
	}, {
		name: "a gap nobody ever saw a value in is no skip (control batch, compaction)",
		h: History{
			Sends: []Send{ok("a", 0, 0), ok("c", 0, 2)},
			Polls: []Poll{poll("c1", 1, 0, 0, "a"), poll("c1", 1, 0, 2, "c")},
		},
	}, {
		name: "G1a: a definitely failed send is read",
		h: History{
			Sends: []Send{ok("a", 0, 0), failed("b")},
			Final: []Poll{fin(0, 0, "a"), fin(0, 1, "b")}, FinalEnds: map[int32]int64{0: 2},
		},
		want: []string{"G1a:0@1:b"},
		fail: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h)
			if got := anomalies(r); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("anomalies\n got %q\nwant %q", got, tc.want)
			}
			err := r.Err()
			if (err != nil) != tc.fail {
				t.Fatalf("Err() = %v, want failure %v", err, tc.fail)
			}
			if err != nil && !errors.Is(err, ErrAnomalies) {
				t.Fatalf("Err() = %v, not ErrAnomalies", err)
			}
		})
	}
}

func TestCheckCounts(t *testing.T) {
	r := Check(History{
		Sends: []Send{ok("a", 0, 0), ok("b", 0, 1), failed("c"), unknown("d")},
		Polls: []Poll{poll("c1", 1, 0, 0, "a")},
		Final: []Poll{fin(0, 0, "a"), fin(0, 1, "b")}, FinalEnds: map[int32]int64{0: 2},
	})
	if r.Sends != 4 || r.Acked != 2 || r.Failed != 1 || r.Unknown != 1 || r.Polls != 1 || r.FinalRead != 2 {
		t.Fatalf("counts: %s", r.Summary())
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
}

// TestCheckIsDeterministic: a shuffled copy of the same history (reads of
// different consumers interleaved differently, sends reordered) gives the
// same report.
func TestCheckIsDeterministic(t *testing.T) {
	h := History{Idempotent: true, FinalEnds: map[int32]int64{0: 50, 1: 50}}
	for i := range 100 {
		p, o := int32(i%2), int64(i/2)
		v := fmt.Sprint("v", i)
		h.Sends = append(h.Sends, ok(v, p, o))
		if i%7 != 0 { // some lost
			h.Final = append(h.Final, fin(p, o, v))
		}
		if i%11 == 0 { // some duplicated
			h.Final = append(h.Final, fin(p, 60+o, v))
		}
		h.Polls = append(h.Polls, poll(fmt.Sprint("c", p), 1, p, o, v))
	}
	want := anomalies(Check(h))
	if len(want) == 0 {
		t.Fatal("no anomalies in a history built with losses and duplicates")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		g := h
		g.Sends = append([]Send(nil), h.Sends...)
		rng.Shuffle(len(g.Sends), func(i, j int) { g.Sends[i], g.Sends[j] = g.Sends[j], g.Sends[i] })
		if got := anomalies(Check(g)); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled sends changed the report:\n%q\n%q", got, want)
		}
	}
}

func TestFaultResultRowAndPercentiles(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, v := range n {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	if got := Percentile(ms(5, 1, 3, 2, 4), 50); got != 3*time.Millisecond {
		t.Fatalf("p50 %v", got)
	}
	if got := Percentile(ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 100), 99); got != 100*time.Millisecond {
		t.Fatalf("p99 %v", got)
	}
	if Percentile(nil, 50) != 0 {
		t.Fatal("p50 of nothing")
	}
	r := FaultResult{Fault: "kill -9 leader", Runs: 3, Reelection: ms(100, 300, 200)}
	r.Add(Check(History{Sends: []Send{ok("a", 0, 0), ok("b", 0, 1)}, Final: []Poll{fin(0, 0, "a")}, FinalEnds: map[int32]int64{0: 2}}))
	want := "| kill -9 leader | 3 | 2 | 1 | 0 | 0 | 0 | 200ms / 300ms | – |"
	if got := r.Row(); got != want {
		t.Fatalf("row\n got %s\nwant %s", got, want)
	}
	path := filepath.Join(t.TempDir(), "m.jsonl")
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "\n"); n != 2 {
		t.Fatalf("%d lines saved:\n%s", n, b)
	}
}
