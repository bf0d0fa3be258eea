package sharegroup

import (
	"cmp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/strata-io/strata/broker/group/consumer"
)

// Topic and TopicImage are the consumer core's: the broker builds one
// image of the metadata for both kinds of groups.
type (
	Topic      = consumer.Topic
	TopicImage = consumer.TopicImage
)

// Assignment is a member's partitions by topic id, each list sorted.
type Assignment map[uuid.UUID][]int32

// Add inserts partition p of topic t (kept sorted, no duplicates).
func (a Assignment) Add(t uuid.UUID, p int32) {
	ps := a[t]
	i, found := slices.BinarySearch(ps, p)
	if !found {
		a[t] = slices.Insert(ps, i, p)
	} else if ps == nil {
		a[t] = []int32{}
	}
}

// Has reports whether a holds partition p of topic t.
func (a Assignment) Has(t uuid.UUID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

// Size is the number of partitions in a.
func (a Assignment) Size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Clone deep-copies a (nil stays nil).
func (a Assignment) Clone() Assignment {
	if a == nil {
		return nil
	}
	b := make(Assignment, len(a))
	for t, ps := range a {
		b[t] = slices.Clone(ps)
	}
	return b
}

// Equal compares the partitions of a and b (an empty topic entry equals
// a missing one).
func (a Assignment) Equal(b Assignment) bool {
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	for t, ps := range b {
		if _, ok := a[t]; !ok && len(ps) > 0 {
			return false
		}
	}
	return true
}

// TopicIDs returns the topics with at least one partition, sorted.
func (a Assignment) TopicIDs() []uuid.UUID {
	ids := make([]uuid.UUID, 0, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			ids = append(ids, t)
		}
	}
	slices.SortFunc(ids, func(x, y uuid.UUID) int { return strings.Compare(string(x[:]), string(y[:])) })
	return ids
}

// MemberSpec is one member as the assignor sees it.
type MemberSpec struct {
	ID     string
	Topics []uuid.UUID // subscribed topics that exist
}

// AssignorName is the one server assignor of share groups (Kafka's
// SimpleAssignor, "simple").
const AssignorName = "simple"

// Simple computes the target assignment of a share group with the
// properties of Kafka 4.x's SimpleAssignor, topic by topic (so
// heterogeneous subscriptions need nothing special):
//
//   - each partition of a subscribed topic goes to at least one of its
//     subscribers and only to subscribers; a member never holds a
//     partition twice;
//   - with n subscribers and P partitions, a partition is shared by
//     s = ceil(n/P) members (s = 1 while n <= P) and the s*P slots are
//     spread over the members so their counts differ by at most one;
//   - sticky: a member keeps the partitions it had (prev) up to its
//     share, the extra slot going first to the members holding more, and
//     only the rest moves (a partition shared less than s times first,
//     lowest index first).
//
// It is a pure function of its arguments; prev may be nil. Differences
// from Kafka: not a port, so the choice of which member gets which
// partition may differ; the counts and the sharing are Kafka's.
func Simple(members []MemberSpec, topics map[uuid.UUID]Topic, prev map[string]Assignment) map[string]Assignment {
	out := make(map[string]Assignment, len(members))
	subsOf := map[uuid.UUID][]string{}
	for _, m := range members {
		out[m.ID] = Assignment{}
		for _, t := range m.Topics {
			if _, ok := topics[t]; ok && !slices.Contains(subsOf[t], m.ID) {
				subsOf[t] = append(subsOf[t], m.ID)
			}
		}
	}
	for t, subs := range subsOf {
		np := int(topics[t].Partitions)
		if np <= 0 {
			continue
		}
		slices.Sort(subs)
		for m, ps := range assignTopic(subs, np, func(m string) []int32 { return prev[m][t] }) {
			if len(ps) > 0 {
				out[m][t] = ps
			}
		}
	}
	return out
}

// assignTopic spreads np partitions over the sorted subscribers subs.
func assignTopic(subs []string, np int, current func(string) []int32) map[string][]int32 {
	n := len(subs)
	share := (n + np - 1) / np
	slots := share * np
	cur := make(map[string][]int32, n)
	for _, m := range subs {
		for _, p := range current(m) {
			if p >= 0 && int(p) < np {
				cur[m] = append(cur[m], p)
			}
		}
	}
	// The extra slots go to the members holding more (stickiness), then
	// by id.
	order := slices.Clone(subs)
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(len(cur[b]), len(cur[a])) })
	quota := make(map[string]int, n)
	for i, m := range order {
		quota[m] = slots / n
		if i < slots%n {
			quota[m]++
		}
	}
	holders := make([]int, np)
	got := make(map[string][]int32, n)
	for _, m := range order {
		for _, p := range cur[m] {
			if len(got[m]) < quota[m] && holders[p] < share && !slices.Contains(got[m], p) {
				got[m] = append(got[m], p)
				holders[p]++
			}
		}
	}
	for _, m := range subs {
		for len(got[m]) < quota[m] {
			best := -1
			for p := range np {
				if slices.Contains(got[m], int32(p)) {
					continue
				}
				// Fewest holders first (those below the share before any
				// at it), lowest index on ties.
				if best < 0 || holders[p] < holders[best] {
					best = p
				}
			}
			if best < 0 {
				break
			}
			got[m] = append(got[m], int32(best))
			holders[best]++
		}
	}
	// A member that already held every partition below the share took one
	// at it: move a holder of an over-shared partition to an
	// under-shared one it lacks (one exists: the first has more
	// holders), keeping every member's count.
	for {
		over, under := -1, -1
		for p := range np {
			if holders[p] > share && over < 0 {
				over = p
			}
			if holders[p] < share && under < 0 {
				under = p
			}
		}
		if over < 0 || under < 0 {
			break
		}
		moved := false
		for _, m := range subs {
			if slices.Contains(got[m], int32(over)) && !slices.Contains(got[m], int32(under)) {
				i := slices.Index(got[m], int32(over))
				got[m][i] = int32(under)
				holders[over]--
				holders[under]++
				moved = true
				break
			}
		}
		if !moved {
			break // cannot happen (see above); never loop
		}
	}
	for _, m := range subs {
		slices.Sort(got[m])
	}
	return got
}
