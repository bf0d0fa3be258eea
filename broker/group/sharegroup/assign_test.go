package sharegroup

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/google/uuid"
)

// TestSimpleScripts runs testdata/assign: "topics" then "assign" with one
// member per line ("m1 a,b"); each assign is sticky from the previous one
// (reset starts over).
func TestSimpleScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/assign", func(t *testing.T, path string) {
		var (
			img  TopicImage
			nm   names
			prev map[string]Assignment
		)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "topics":
				img, nm = parseTopics(t, td.Input)
				return ""
			case "reset":
				prev = nil
				return ""
			case "assign":
				byID := map[uuid.UUID]Topic{}
				for _, tp := range img {
					byID[tp.ID] = tp
				}
				var specs []MemberSpec
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					f := strings.Fields(line)
					s := MemberSpec{ID: f[0]}
					if len(f) > 1 {
						for _, name := range strings.Split(f[1], ",") {
							s.Topics = append(s.Topics, topicID(name))
						}
					}
					specs = append(specs, s)
				}
				got := Simple(specs, byID, prev)
				checkSimple(t, specs, byID, got)
				var b strings.Builder
				for _, id := range slices.Sorted(maps.Keys(got)) {
					fmt.Fprintf(&b, "%s %s\n", id, nm.format(got[id]))
				}
				prev = got
				return b.String()
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return ""
		})
	})
}

// checkSimple asserts the assignor's properties: every partition of a
// subscribed topic has between 1 and ceil(n/P) (+1 only when a member
// holds every partition) holders, all subscribers, and per topic the
// members' counts differ by at most one.
func checkSimple(t testing.TB, specs []MemberSpec, topics map[uuid.UUID]Topic, got map[string]Assignment) {
	t.Helper()
	subs := map[uuid.UUID][]string{}
	for _, s := range specs {
		for _, tp := range s.Topics {
			if _, ok := topics[tp]; ok && !slices.Contains(subs[tp], s.ID) {
				subs[tp] = append(subs[tp], s.ID)
			}
		}
	}
	for id, a := range got {
		for tp, ps := range a {
			if !slices.Contains(subs[tp], id) {
				t.Fatalf("%s holds %v of a topic it does not subscribe to", id, ps)
			}
			if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
				t.Fatalf("%s: partitions %v not sorted and unique", id, ps)
			}
		}
	}
	for tp, ss := range subs {
		np := int(topics[tp].Partitions)
		if np == 0 {
			continue
		}
		share := (len(ss) + np - 1) / np
		holders := make([]int, np)
		lo, hi := 1<<30, 0
		for _, id := range ss {
			for _, p := range got[id][tp] {
				if p < 0 || int(p) >= np {
					t.Fatalf("%s holds partition %d of a %d-partition topic", id, p, np)
				}
				holders[p]++
			}
			lo, hi = min(lo, len(got[id][tp])), max(hi, len(got[id][tp]))
		}
		if hi-lo > 1 {
			t.Fatalf("topic counts unbalanced: %d..%d over %d members, %d partitions", lo, hi, len(ss), np)
		}
		for p, h := range holders {
			if h < 1 || h > share {
				t.Fatalf("partition %d has %d holders, want 1..%d (%d members, %d partitions): %v", p, h, share, len(ss), np, got)
			}
		}
	}
}

// TestSimpleProperty checks the properties on random groups evolving by
// joins, leaves, subscription and partition-count changes, and that an
// unchanged input reassigns nothing (stickiness).
func TestSimpleProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		topics := map[uuid.UUID]Topic{}
		ids := []uuid.UUID{}
		for i := range 1 + rng.IntN(3) {
			id := topicID(fmt.Sprint("t", i))
			topics[id] = Topic{ID: id, Name: fmt.Sprint("t", i), Partitions: int32(1 + rng.IntN(8))}
			ids = append(ids, id)
		}
		var prev map[string]Assignment
		specs := []MemberSpec{}
		for step := range 20 {
			switch rng.IntN(4) {
			case 0, 1:
				s := MemberSpec{ID: fmt.Sprintf("m%02d", rng.IntN(30))}
				for _, id := range ids {
					if rng.IntN(2) == 0 {
						s.Topics = append(s.Topics, id)
					}
				}
				specs = slices.DeleteFunc(specs, func(o MemberSpec) bool { return o.ID == s.ID })
				specs = append(specs, s)
			case 2:
				if len(specs) > 0 {
					i := rng.IntN(len(specs))
					specs = slices.Delete(specs, i, i+1)
				}
			case 3:
				id := ids[rng.IntN(len(ids))]
				tp := topics[id]
				tp.Partitions = int32(1 + rng.IntN(8))
				topics[id] = tp
			}
			got := Simple(specs, topics, prev)
			checkSimple(t, specs, topics, got)
			again := Simple(specs, topics, got)
			for id := range got {
				if !got[id].Equal(again[id]) {
					t.Fatalf("iter %d step %d: not sticky: %s %v then %v", iter, step, id, got[id], again[id])
				}
			}
			prev = got
		}
	}
}
