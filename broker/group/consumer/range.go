package consumer

import "slices"

// Range is the "range" server assignor (Kafka's server-side RangeAssignor):
// per topic, the subscribers sorted by member ID get consecutive ranges of
// partitions, the first N%M one partition more. Members with the same
// subscriptions therefore get the same partition numbers of topics with
// the same partition count (co-partitioning, what joins across topics
// need). It is not sticky beyond that: a join or leave shifts the ranges.
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
	for _, m := range ms {
		out[m.ID] = Assignment{}
	}
	ids := make([]string, 0, len(in.Topics))
	subscribers := map[string][]string{} // topic ID bytes -> member IDs, sorted (ms is)
	for _, m := range ms {
		for _, t := range subscribedTopics(m, in.Topics) {
			k := string(t[:])
			if _, ok := subscribers[k]; !ok {
				ids = append(ids, k)
			}
			subscribers[k] = append(subscribers[k], m.ID)
		}
	}
	slices.Sort(ids)
	for _, k := range ids {
		var t [16]byte
		copy(t[:], k)
		top := in.Topics[t]
		subs := subscribers[k]
		n, m := int(top.Partitions), len(subs)
		quota, extra := n/m, n%m
		start := 0
		for i, id := range subs {
			cnt := quota
			if i < extra {
				cnt++
			}
			if cnt == 0 {
				continue
			}
			ps := make([]int32, cnt)
			for j := range ps {
				ps[j] = int32(start + j)
			}
			out[id][t] = ps
			start += cnt
		}
	}
	return out, nil
}
