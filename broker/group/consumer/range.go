package consumer

import (
	"slices"

	"github.com/google/uuid"
)

// Range is the "range" server assignor (Kafka's server-side RangeAssignor:
// range and sticky at once). Per topic, over its subscribers sorted by
// member ID, with quota = partitions/subscribers and the first
// partitions%subscribers members entitled to one more:
//   - each member keeps the lowest of its current partitions of the topic
//     up to the quota (one more while extra slots remain, if it held
//     more);
//   - the partitions left are handed out in ascending ranges, in member
//     order, to the members below their share.
//
// Every topic goes through the same steps with the same member order, so
// members with the same subscriptions get the same partition numbers of
// topics with the same partition count (co-partitioning, what joins
// across topics need), from the first assignment on and across epochs.
type Range struct{}

// Name is the assignor's name in ConsumerGroupHeartbeat's ServerAssignor.
func (Range) Name() string { return "range" }

// Assign implements [Assignor].
func (Range) Assign(in AssignInput) (map[string]Assignment, error) {
	ms, err := sortedMembers(in)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Assignment, len(ms))
	subscribers := map[uuid.UUID][]int{}
	var topics []uuid.UUID
	for i, m := range ms {
		out[m.ID] = Assignment{}
		for _, t := range subscribedTopics(m, in.Topics) {
			if _, ok := subscribers[t]; !ok {
				topics = append(topics, t)
			}
			subscribers[t] = append(subscribers[t], i)
		}
	}
	slices.SortFunc(topics, compareID)
	for _, t := range topics {
		subs := subscribers[t]
		n := in.Topics[t].Partitions
		quota, extra := int(n)/len(subs), int(n)%len(subs)
		taken := make([]bool, n)
		type unfilled struct{ member, remaining int }
		var open []unfilled
		for _, i := range subs {
			var cur []int32
			for _, p := range ms[i].Current[t] { // sorted
				if p >= 0 && p < n && !taken[p] {
					cur = append(cur, p)
				}
			}
			keep := min(len(cur), quota)
			remaining := quota - len(cur)
			if remaining < 0 && extra > 0 {
				keep++
				extra--
			} else {
				open = append(open, unfilled{i, remaining})
			}
			for _, p := range cur[:keep] {
				taken[p] = true
				out[ms[i].ID].add(t, p)
			}
		}
		next := int32(0)
		for _, u := range open {
			r := u.remaining
			if extra > 0 {
				r++
				extra--
			}
			for ; r > 0; r-- {
				for taken[next] {
					next++
				}
				taken[next] = true
				out[ms[u.member].ID].add(t, next)
			}
		}
	}
	return out, nil
}
