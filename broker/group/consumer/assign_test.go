package consumer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/google/uuid"
)

// assignHarness runs the assignor scripts in testdata/assign: "topics"
// sets the topic metadata, "assign assignor=NAME" assigns the members
// listed (one per line: "id topics=a,b [rack=r]") starting from the
// previous assign's result (stickiness across epochs), and prints each
// member's assignment, the spread and how many partitions changed owner.
type assignHarness struct {
	topics map[uuid.UUID]Topic
	byName map[string]uuid.UUID
	names  names
	prev   map[string]Assignment
}

func TestAssignorsDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata/assign", func(t *testing.T, path string) {
		h := &assignHarness{topics: map[uuid.UUID]Topic{}, byName: map[string]uuid.UUID{}, names: names{}, prev: map[string]Assignment{}}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "topics":
				h.topics, h.byName = map[uuid.UUID]Topic{}, map[string]uuid.UUID{}
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					top := parseTopic(t, line)
					h.topics[top.ID], h.byName[top.Name], h.names[top.ID] = top, top.ID, top.Name
				}
				return ""
			case "reset":
				h.prev = map[string]Assignment{}
				return ""
			case "assign":
				return h.assign(t, td)
			default:
				t.Fatalf("unknown command %q", td.Cmd)
				return ""
			}
		})
	})
}

func assignorByName(t testing.TB, name string) Assignor {
	for _, a := range Assignors() {
		if a.Name() == name {
			return a
		}
	}
	t.Fatalf("no assignor %q", name)
	return nil
}

func (h *assignHarness) assign(t *testing.T, td *datadriven.TestData) string {
	as := assignorByName(t, argStr(td, "assignor", "uniform"))
	var in AssignInput
	in.Topics = h.topics
	for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
		f := strings.Fields(line)
		args := kv(t, f[1:])
		m := MemberSpec{ID: f[0], Rack: args["rack"], Current: h.prev[f[0]]}
		if s := args["topics"]; s != "" {
			for _, n := range strings.Split(s, ",") {
				id, ok := h.byName[n]
				if !ok {
					id = topicID(n) // a topic that does not exist
				}
				m.Topics = append(m.Topics, id)
			}
		}
		in.Members = append(in.Members, m)
	}
	out, err := as.Assign(in)
	if err != nil {
		return "error: " + err.Error()
	}
	ids := make([]string, 0, len(out))
	for id := range out {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	lo, hi, moved := -1, 0, 0
	for _, id := range ids {
		a := out[id]
		fmt.Fprintf(&b, "%s: %s\n", id, h.names.format(a))
		if lo < 0 || a.Size() < lo {
			lo = a.Size()
		}
		hi = max(hi, a.Size())
	}
	// A partition moved when its owner in the previous result differs.
	prevOwner := map[tp]string{}
	for id, a := range h.prev {
		for t, ps := range a {
			for _, p := range ps {
				prevOwner[tp{t, p}] = id
			}
		}
	}
	for id, a := range out {
		for t, ps := range a {
			for _, p := range ps {
				if o, ok := prevOwner[tp{t, p}]; ok && o != id {
					moved++
				}
			}
		}
	}
	fmt.Fprintf(&b, "spread: %d-%d moved: %d\n", lo, hi, moved)
	h.prev = out
	if err := checkAssignment(in, out); err != nil {
		t.Errorf("invalid assignment: %v", err)
	}
	return b.String()
}

// checkAssignment verifies the invariants every assignor keeps: every
// member present, every partition of a subscribed topic assigned exactly
// once, and only to a member subscribed to its topic.
func checkAssignment(in AssignInput, out map[string]Assignment) error {
	subscribed := map[uuid.UUID]map[string]bool{}
	for _, m := range in.Members {
		if _, ok := out[m.ID]; !ok {
			return fmt.Errorf("member %s missing", m.ID)
		}
		for _, t := range m.Topics {
			if _, ok := in.Topics[t]; ok {
				if subscribed[t] == nil {
					subscribed[t] = map[string]bool{}
				}
				subscribed[t][m.ID] = true
			}
		}
	}
	if len(out) != len(in.Members) {
		return fmt.Errorf("%d members in the result, %d in the input", len(out), len(in.Members))
	}
	owner := map[tp]string{}
	for id, a := range out {
		for t, ps := range a {
			if !slices.IsSorted(ps) {
				return fmt.Errorf("member %s topic %s: partitions not sorted %v", id, t, ps)
			}
			for _, p := range ps {
				if !subscribed[t][id] {
					return fmt.Errorf("member %s got %s-%d without subscribing", id, t, p)
				}
				if p < 0 || p >= in.Topics[t].Partitions {
					return fmt.Errorf("member %s got nonexistent %s-%d", id, t, p)
				}
				if o, ok := owner[tp{t, p}]; ok {
					return fmt.Errorf("%s-%d assigned to %s and %s", t, p, o, id)
				}
				owner[tp{t, p}] = id
			}
		}
	}
	for t := range subscribed {
		for p := int32(0); p < in.Topics[t].Partitions; p++ {
			if _, ok := owner[tp{t, p}]; !ok {
				return fmt.Errorf("%s-%d unassigned", t, p)
			}
		}
	}
	return nil
}

// randomGroup builds a random group: 1-5 topics of 1-40 partitions, 1-30
// members, each subscribing to all topics (homogeneous) or a random
// subset, with random racks on some.
func randomGroup(rng *rand.Rand, homogeneous bool) AssignInput {
	in := AssignInput{Topics: map[uuid.UUID]Topic{}}
	var ids []uuid.UUID
	racks := []string{"r1", "r2", "r3"}
	withRacks := rng.IntN(2) == 0
	for i := range 1 + rng.IntN(5) {
		top := Topic{Name: fmt.Sprintf("t%d", i), Partitions: int32(1 + rng.IntN(40))}
		top.ID = topicID(top.Name)
		if withRacks {
			for range top.Partitions {
				top.Racks = append(top.Racks, []string{racks[rng.IntN(3)]})
			}
		}
		in.Topics[top.ID] = top
		ids = append(ids, top.ID)
	}
	for i := range 1 + rng.IntN(30) {
		m := MemberSpec{ID: fmt.Sprintf("m%02d", i)}
		if withRacks {
			m.Rack = racks[rng.IntN(3)]
		}
		for _, t := range ids {
			if homogeneous || rng.IntN(2) == 0 {
				m.Topics = append(m.Topics, t)
			}
		}
		in.Members = append(in.Members, m)
	}
	return in
}

func spread(out map[string]Assignment) (lo, hi int) {
	lo = -1
	for _, a := range out {
		if lo < 0 || a.Size() < lo {
			lo = a.Size()
		}
		hi = max(hi, a.Size())
	}
	return lo, hi
}

// withCurrent returns in with each member's Current set from prev.
func withCurrent(in AssignInput, prev map[string]Assignment) AssignInput {
	out := in
	out.Members = slices.Clone(in.Members)
	for i := range out.Members {
		out.Members[i].Current = prev[out.Members[i].ID]
	}
	return out
}

// TestUniformPropertiesHomogeneous: on random homogeneous groups the
// uniform assignor assigns every partition once, balances within one,
// does not depend on the members' order, and after a random member
// joins or leaves every remaining member keeps as many of its partitions
// as its new share allows (minimal movement).
func TestUniformPropertiesHomogeneous(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 848))
	for iter := range 500 {
		in := randomGroup(rng, true)
		out, err := Uniform{}.Assign(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAssignment(in, out); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if lo, hi := spread(out); hi-lo > 1 {
			t.Fatalf("iter %d: spread %d-%d", iter, lo, hi)
		}
		shuffled := withCurrent(in, nil)
		rng.Shuffle(len(shuffled.Members), func(i, j int) {
			shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
		})
		if again, _ := (Uniform{}).Assign(shuffled); !sameAssignments(out, again) {
			t.Fatalf("iter %d: result depends on member order", iter)
		}
		// A join or a leave, from the previous target.
		next := withCurrent(in, out)
		if rng.IntN(2) == 0 || len(next.Members) == 1 {
			j := MemberSpec{ID: fmt.Sprintf("new%d", iter), Topics: next.Members[0].Topics}
			next.Members = append(next.Members, j)
		} else {
			k := rng.IntN(len(next.Members))
			next.Members = slices.Delete(next.Members, k, k+1)
		}
		out2, err := Uniform{}.Assign(next)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAssignment(next, out2); err != nil {
			t.Fatalf("iter %d after change: %v", iter, err)
		}
		if lo, hi := spread(out2); hi-lo > 1 {
			t.Fatalf("iter %d after change: spread %d-%d", iter, lo, hi)
		}
		for _, m := range next.Members {
			kept := intersect(m.Current, out2[m.ID])
			if want := min(m.Current.Size(), out2[m.ID].Size()); kept != want {
				t.Fatalf("iter %d: member %s kept %d of %d, new size %d (want %d kept)",
					iter, m.ID, kept, m.Current.Size(), out2[m.ID].Size(), want)
			}
		}
	}
}

// TestUniformPropertiesHeterogeneous: on random mixed subscriptions every
// subscribed partition is assigned once to a subscriber, and no single
// move of a partition to another subscriber of its topic holding two
// fewer exists (local balance); with a change, members keep what they
// held unless a move was needed.
func TestUniformPropertiesHeterogeneous(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 848))
	for iter := range 500 {
		in := randomGroup(rng, false)
		out, err := Uniform{}.Assign(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAssignment(in, out); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if err := checkLocalBalance(in, out); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		// Reassigning the same group from its own result moves nothing.
		again, _ := Uniform{}.Assign(withCurrent(in, out))
		if !sameAssignments(out, again) {
			t.Fatalf("iter %d: a second assignment of an unchanged group moved partitions", iter)
		}
	}
}

func checkLocalBalance(in AssignInput, out map[string]Assignment) error {
	subs := map[uuid.UUID][]string{}
	for _, m := range in.Members {
		for _, t := range subscribedTopics(m, in.Topics) {
			subs[t] = append(subs[t], m.ID)
		}
	}
	for id, a := range out {
		for t := range a {
			for _, s := range subs[t] {
				if out[s].Size() < a.Size()-1 {
					return fmt.Errorf("%s (%d) could give a partition of %s to %s (%d)", id, a.Size(), in.Topics[t].Name, s, out[s].Size())
				}
			}
		}
	}
	return nil
}

// TestRangeProperties: every partition once; members with the same
// subscriptions get the same partition numbers of topics with equal
// partition counts (co-partitioning), also after a member joins or
// leaves; per topic the subscribers' shares differ by at most one.
func TestRangeProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 848))
	for iter := range 500 {
		in := randomGroup(rng, rng.IntN(2) == 0)
		// Equal partition counts for a co-partitioned pair.
		if len(in.Topics) > 1 {
			var first Topic
			i := 0
			for _, top := range in.Topics {
				if i == 0 {
					first = top
				} else if i == 1 {
					top.Partitions, top.Racks = first.Partitions, nil
					in.Topics[top.ID] = top
				}
				i++
			}
		}
		out, err := Range{}.Assign(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAssignment(in, out); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		for _, m := range in.Members {
			for _, t1 := range m.Topics {
				for _, t2 := range m.Topics {
					if in.Topics[t1].Partitions != in.Topics[t2].Partitions || !sameSubscribers(in, t1, t2) {
						continue
					}
					if !slices.Equal(out[m.ID][t1], out[m.ID][t2]) {
						t.Fatalf("iter %d: member %s not co-partitioned: %v vs %v", iter, m.ID, out[m.ID][t1], out[m.ID][t2])
					}
				}
			}
		}
		// After a member joins or leaves, from the previous target: still
		// co-partitioned, still every partition once.
		next := withCurrent(in, out)
		if rng.IntN(2) == 0 || len(next.Members) == 1 {
			next.Members = append(next.Members, MemberSpec{ID: fmt.Sprintf("new%d", iter), Topics: next.Members[0].Topics})
		} else {
			k := rng.IntN(len(next.Members))
			next.Members = slices.Delete(next.Members, k, k+1)
		}
		out2, err := Range{}.Assign(next)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAssignment(next, out2); err != nil {
			t.Fatalf("iter %d after change: %v", iter, err)
		}
		for _, m := range next.Members {
			for _, t1 := range m.Topics {
				for _, t2 := range m.Topics {
					if next.Topics[t1].Partitions == next.Topics[t2].Partitions && sameSubscribers(next, t1, t2) &&
						sameSubscribers(in, t1, t2) && !slices.Equal(out2[m.ID][t1], out2[m.ID][t2]) {
						t.Fatalf("iter %d after change: member %s not co-partitioned: %v vs %v", iter, m.ID, out2[m.ID][t1], out2[m.ID][t2])
					}
				}
			}
		}
		for tid := range in.Topics {
			lo, hi := -1, 0
			for _, m := range in.Members {
				if !slices.Contains(m.Topics, tid) {
					continue
				}
				n := len(out[m.ID][tid])
				if lo < 0 || n < lo {
					lo = n
				}
				hi = max(hi, n)
			}
			if lo >= 0 && hi-lo > 1 {
				t.Fatalf("iter %d: topic %s spread %d-%d", iter, in.Topics[tid].Name, lo, hi)
			}
		}
	}
}

func sameSubscribers(in AssignInput, a, b uuid.UUID) bool {
	for _, m := range in.Members {
		if slices.Contains(m.Topics, a) != slices.Contains(m.Topics, b) {
			return false
		}
	}
	return true
}

func intersect(a, b Assignment) int {
	n := 0
	for t, ps := range a {
		for _, p := range ps {
			if b.Has(t, p) {
				n++
			}
		}
	}
	return n
}

func sameAssignments(a, b map[string]Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for id, x := range a {
		if !x.Equal(b[id]) {
			return false
		}
	}
	return true
}
