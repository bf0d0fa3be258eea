package group

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AppendFunc appends one record batch to the log of __consumer_offsets
// partition, as its leader, and returns once appended (the broker's
// partition append path: high watermark, fetch wake-ups, metrics). It
// returns an error wrapping kerr.NotCoordinator (or NotLeaderForPartition)
// when this broker does not lead the partition.
type AppendFunc func(ctx context.Context, partition int32, batch []byte) error

// StoreOptions configure a [Store].
type StoreOptions struct {
	// Append writes batches to __consumer_offsets; required.
	Append AppendFunc
	// Now, nil means time.Now.
	Now func() time.Time
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Commit is one offset to commit.
type Commit struct {
	TopicPartition
	Offset
}

// Store holds the committed offsets of the groups of the __consumer_offsets
// partitions this broker leads, and writes them (and group metadata, as
// the [Persister] the membership state machine uses) to those partitions.
// It is safe for concurrent use.
//
// A commit is made visible (to [Store.Fetch]) only after its batch is
// appended. Commits, deletes and group writes on one partition are
// serialised by that partition's write lock, so the in-memory state is
// installed in the order the log holds the records.
type Store struct {
	append AppendFunc
	now    func() time.Time

	wmu    sync.Mutex            // guards writes (the map, not the locks in it)
	writes map[int32]*sync.Mutex // per partition: append+install in log order

	mu      sync.RWMutex                         // guards offsets, owner
	offsets map[string]map[TopicPartition]Offset // group → committed offsets
	owner   map[string]int32                     // group → its __consumer_offsets partition
}

// NewStore returns an empty store.
func NewStore(o StoreOptions) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{append: o.Append, now: o.Now, writes: map[int32]*sync.Mutex{},
		offsets: map[string]map[TopicPartition]Offset{}, owner: map[string]int32{}}
}

func (s *Store) writeLock(partition int32) *sync.Mutex {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	m := s.writes[partition]
	if m == nil {
		m = &sync.Mutex{}
		s.writes[partition] = m
	}
	return m
}

// ErrNoRecords is returned by writes given nothing to write.
var ErrNoRecords = errors.New("group: nothing to write")

func (s *Store) write(ctx context.Context, partition int32, recs []KV, install func()) error {
	if len(recs) == 0 {
		return ErrNoRecords
	}
	if s.append == nil {
		return fmt.Errorf("group: store has no append path: %w", kerr.CoordinatorNotAvailable)
	}
	m := s.writeLock(partition)
	m.Lock()
	defer m.Unlock()
	if err := s.append(ctx, partition, BuildBatch(recs, s.now().UnixMilli())); err != nil {
		return err
	}
	s.mu.Lock()
	install()
	s.mu.Unlock()
	return nil
}

// Commit appends the offsets of group (on __consumer_offsets partition)
// as one batch and, once appended, makes them visible. Either all are
// committed or none.
func (s *Store) Commit(ctx context.Context, partition int32, group string, commits []Commit) error {
	recs := make([]KV, len(commits))
	for i := range commits {
		recs[i] = OffsetCommitRecord(group, commits[i].Topic, commits[i].Partition, &commits[i].Offset)
	}
	return s.write(ctx, partition, recs, func() {
		for _, c := range commits {
			s.putLocked(partition, group, c.TopicPartition, c.Offset)
		}
	})
}

func (s *Store) putLocked(partition int32, group string, tp TopicPartition, off Offset) {
	g := s.offsets[group]
	if g == nil {
		g = map[TopicPartition]Offset{}
		s.offsets[group] = g
	}
	g[tp] = off
	s.owner[group] = partition
}

// DeleteOffsets appends tombstones for the given offsets of group and
// forgets them once appended. Partitions without a committed offset are
// skipped (nothing to delete).
func (s *Store) DeleteOffsets(ctx context.Context, partition int32, group string, tps []TopicPartition) error {
	var recs []KV
	var del []TopicPartition
	s.mu.RLock()
	for _, tp := range tps {
		if _, ok := s.offsets[group][tp]; ok {
			recs = append(recs, OffsetCommitRecord(group, tp.Topic, tp.Partition, nil))
			del = append(del, tp)
		}
	}
	s.mu.RUnlock()
	if len(recs) == 0 {
		return nil
	}
	return s.write(ctx, partition, recs, func() {
		for _, tp := range del {
			s.deleteLocked(group, tp)
		}
	})
}

func (s *Store) deleteLocked(group string, tp TopicPartition) {
	delete(s.offsets[group], tp)
	if len(s.offsets[group]) == 0 {
		delete(s.offsets, group)
	}
}

// StoreGroup implements [Persister]: it appends g's GroupMetadata record.
func (s *Store) StoreGroup(ctx context.Context, partition int32, g GroupSnapshot) error {
	return s.write(ctx, partition, []KV{GroupMetadataRecord(g, false)}, func() { s.owner[g.Group] = partition })
}

// DeleteGroup implements [Persister]: it appends tombstones for the
// group's metadata and every offset it committed, and forgets them.
func (s *Store) DeleteGroup(ctx context.Context, partition int32, group string) error {
	recs := []KV{}
	s.mu.RLock()
	for _, tp := range sortedTPs(s.offsets[group]) {
		recs = append(recs, OffsetCommitRecord(group, tp.Topic, tp.Partition, nil))
	}
	s.mu.RUnlock()
	recs = append(recs, GroupMetadataRecord(GroupSnapshot{Group: group}, true))
	return s.write(ctx, partition, recs, func() {
		delete(s.offsets, group)
		delete(s.owner, group)
	})
}

// Fetch returns group's committed offset of tp.
func (s *Store) Fetch(group string, tp TopicPartition) (Offset, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.offsets[group][tp]
	return o, ok
}

// FetchAll returns every committed offset of group, sorted by topic and
// partition.
func (s *Store) FetchAll(group string) []Commit {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.offsets[group]
	out := make([]Commit, 0, len(g))
	for _, tp := range sortedTPs(g) {
		out = append(out, Commit{TopicPartition: tp, Offset: g[tp]})
	}
	return out
}

// Groups returns the groups that have committed offsets, sorted.
func (s *Store) Groups() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.offsets))
	for g := range s.offsets {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Each calls fn for every committed offset (the lag collector), under the
// read lock: fn must not call back into the store.
func (s *Store) Each(fn func(group string, tp TopicPartition, off Offset)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for g, m := range s.offsets {
		for tp, o := range m {
			fn(g, tp, o)
		}
	}
}

// Apply installs one record read back from partition's log during a load
// (the newest record of a key wins, as the log is replayed in order).
func (s *Store) Apply(partition int32, e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.IsOffset && e.Deleted:
		s.deleteLocked(e.Group, TopicPartition{e.Topic, e.Partition})
	case e.IsOffset:
		s.putLocked(partition, e.Group, TopicPartition{e.Topic, e.Partition}, e.Offset)
	case e.Deleted:
		delete(s.owner, e.Group)
	default:
		s.owner[e.Group] = partition
	}
}

// Unload forgets every group of partition (this broker no longer leads it).
func (s *Store) Unload(partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for g, p := range s.owner {
		if p == partition {
			delete(s.owner, g)
			delete(s.offsets, g)
		}
	}
}

// ExpireOffsets removes, with tombstones, the offsets that have expired at
// now: with Kafka 2.1+ semantics (KIP-211), an offset with an explicit
// ExpireTimestamp expires then; otherwise an offset expires retention
// after its commit if expirable(group, topic) says so: the caller answers
// true for groups without members (Empty, or unknown to the membership)
// and, KIP-496, for topics no member of a consumer group subscribes to. It returns how many offsets it removed; a group
// whose tombstones fail to append keeps its offsets (tried again next time).
// emptied lists the groups left with no offsets at all, with their
// partitions (the caller may then remove an Empty group, as Kafka does).
func (s *Store) ExpireOffsets(ctx context.Context, retention time.Duration, expirable func(group, topic string) bool) (n int, emptied []GroupPartition, err error) {
	nowMs := s.now().UnixMilli()
	type victim struct {
		partition int32
		group     string
		tps       []TopicPartition
	}
	var victims []victim
	s.mu.RLock()
	for g, m := range s.offsets {
		var tps []TopicPartition
		for _, tp := range sortedTPs(m) {
			o := m[tp]
			switch {
			case o.ExpireTimestamp >= 0:
				if nowMs >= o.ExpireTimestamp {
					tps = append(tps, tp)
				}
			case nowMs >= o.CommitTimestamp+retention.Milliseconds() && expirable(g, tp.Topic):
				tps = append(tps, tp)
			}
		}
		if len(tps) > 0 {
			victims = append(victims, victim{s.owner[g], g, tps})
		}
	}
	s.mu.RUnlock()
	var errs []error
	for _, v := range victims {
		if err := s.DeleteOffsets(ctx, v.partition, v.group, v.tps); err != nil {
			errs = append(errs, fmt.Errorf("group: expire offsets of %q: %w", v.group, err))
			continue
		}
		n += len(v.tps)
		s.mu.RLock()
		left := len(s.offsets[v.group])
		s.mu.RUnlock()
		if left == 0 {
			emptied = append(emptied, GroupPartition{Group: v.group, Partition: v.partition})
		}
	}
	return n, emptied, errors.Join(errs...)
}

// GroupPartition is a group and its __consumer_offsets partition.
type GroupPartition struct {
	Group     string
	Partition int32
}

// GroupsOf returns the groups of partition that have committed offsets,
// sorted.
func (s *Store) GroupsOf(partition int32) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for g := range s.offsets {
		if s.owner[g] == partition {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

func sortedTPs(m map[TopicPartition]Offset) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
