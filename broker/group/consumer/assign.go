package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// Assignment is a member's partitions by topic ID. Partition lists are kept
// sorted and without duplicates by every function of this package; an
// absent topic and an empty list mean the same.
type Assignment map[uuid.UUID][]int32

// Size is the number of partitions in a.
func (a Assignment) Size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Equal reports whether a and b hold the same partitions.
func (a Assignment) Equal(b Assignment) bool {
	if a.Size() != b.Size() {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of a, without empty topics.
func (a Assignment) Clone() Assignment {
	c := make(Assignment, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			c[t] = slices.Clone(ps)
		}
	}
	return c
}

// Has reports whether a holds partition p of topic t.
func (a Assignment) Has(t uuid.UUID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

// add inserts p into topic t, keeping the list sorted.
func (a Assignment) add(t uuid.UUID, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

// remove deletes p from topic t.
func (a Assignment) remove(t uuid.UUID, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, t)
		} else {
			a[t] = ps
		}
	}
}

// topicIDs returns a's topics in byte order.
func (a Assignment) topicIDs() []uuid.UUID {
	ids := make([]uuid.UUID, 0, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			ids = append(ids, t)
		}
	}
	slices.SortFunc(ids, compareID)
	return ids
}

func compareID(a, b uuid.UUID) int { return strings.Compare(string(a[:]), string(b[:])) }

// Topic is one topic as the assignors and the group see it: Kafka's
// TopicMetadata of a consumer group's subscription metadata.
type Topic struct {
	ID         uuid.UUID
	Name       string
	Partitions int32
	// Racks, when not nil, holds per partition the racks of its replicas;
	// the uniform assignor prefers a member in one of them.
	Racks [][]string
	// Internal topics (__consumer_offsets, __transaction_state) are never
	// matched by a regular expression subscription, only by name.
	Internal bool
}

// MemberSpec is one member as an assignor sees it (Kafka's MemberSubscription
// plus its current target assignment).
type MemberSpec struct {
	ID         string
	InstanceID string
	Rack       string
	// Topics are the subscribed topics that exist, resolved to IDs.
	Topics []uuid.UUID
	// Current is the member's assignment in the previous target, the
	// starting point of a sticky assignor.
	Current Assignment
}

// AssignInput is what an assignor computes over: members (any order; the
// assignors sort by ID) and the subscribed topics' metadata by ID.
type AssignInput struct {
	Members []MemberSpec
	Topics  map[uuid.UUID]Topic
}

// Assignor is a server-side partition assignor (KIP-848's
// ConsumerGroupPartitionAssignor): a pure function from the group's
// subscriptions and topic metadata to a target assignment, with every
// member present in the result (possibly empty). Implementations are
// deterministic and safe for concurrent use.
type Assignor interface {
	Name() string
	Assign(in AssignInput) (map[string]Assignment, error)
}

// ErrAssign is returned by an assignor whose input is inconsistent (two
// members with one ID).
var ErrAssign = errors.New("consumer: assignor input")

// Assignors returns the built-in assignors, Kafka's default order of
// group.consumer.assignors: uniform first (the default), then range.
func Assignors() []Assignor { return []Assignor{Uniform{}, Range{}} }

// sortedMembers copies the members sorted by ID and rejects duplicates.
func sortedMembers(in AssignInput) ([]MemberSpec, error) {
	ms := slices.Clone(in.Members)
	slices.SortFunc(ms, func(a, b MemberSpec) int { return strings.Compare(a.ID, b.ID) })
	for i := 1; i < len(ms); i++ {
		if ms[i].ID == ms[i-1].ID {
			return nil, fmt.Errorf("%w: member %q twice", ErrAssign, ms[i].ID)
		}
	}
	return ms, nil
}

// subscribedTopics returns the member's topics that exist, deduplicated
// and in byte order.
func subscribedTopics(m MemberSpec, topics map[uuid.UUID]Topic) []uuid.UUID {
	var ts []uuid.UUID
	for _, t := range m.Topics {
		if _, ok := topics[t]; ok {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, compareID)
	return slices.Compact(ts)
}
