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
//
// appended, never nil, is called once the batch is in the local log, with
// the offset the log assigned to its first record, before the append waits
// for replication, under the partition's leader append lock (so in log
// order with every other leader append of the partition, transaction
// markers included); it must not call back into the log. An AppendFunc
// that returns nil has called it.
type AppendFunc func(ctx context.Context, partition int32, batch []byte, appended func(baseOffset int64)) error

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
//
// Transactional offsets (KIP-447, [Store.CommitTxn]) are held pending per
// partition and producer id, invisible to Fetch, until
// [Store.CompleteTxn] (the producer's COMMIT or ABORT marker on the
// partition) makes them committed or drops them. Every committed offset
// remembers the log offset of its record: a completed transaction's
// offset replaces the committed one only if its record is newer, so a
// plain commit written after the transactional one wins, whatever order
// the two are installed in (Kafka's rule, OffsetMetadataManager).
type Store struct {
	append AppendFunc
	now    func() time.Time

	wmu    sync.Mutex            // guards writes (the map, not the locks in it)
	writes map[int32]*sync.Mutex // per partition: append+install in log order

	mu      sync.RWMutex                      // guards offsets, owner, pending, loading
	offsets map[string]map[TopicPartition]rec // group → committed offsets
	owner   map[string]int32                  // group → its __consumer_offsets partition
	// pending: partition → producer id → group → transactional offsets
	// not yet completed by a marker.
	pending map[int32]map[int64]map[string]map[TopicPartition]rec
	// loading: partition → completions that arrived while a Loader
	// replayed it (replayed again by Loader.Finish).
	loading map[int32][]completion
}

// rec is an offset and the log offset of the record that stored it.
type rec struct {
	Offset
	at int64
}

// completion is one CompleteTxn call.
type completion struct {
	producerID int64
	commit     bool
	before     int64
}

// NewStore returns an empty store.
func NewStore(o StoreOptions) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{append: o.Append, now: o.Now, writes: map[int32]*sync.Mutex{},
		offsets: map[string]map[TopicPartition]rec{}, owner: map[string]int32{},
		pending: map[int32]map[int64]map[string]map[TopicPartition]rec{}, loading: map[int32][]completion{}}
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

// write appends b (holding recs) and, once appended, calls install with
// the log offset of its first record, under the store's lock. appended,
// if set, runs under the store's lock as soon as the batch is in the
// local log (before replication); failed, if set, runs under the lock
// when the append fails after appended ran.
func (s *Store) write(ctx context.Context, partition int32, b []byte, install, appended, failed func(base int64)) error {
	if s.append == nil {
		return fmt.Errorf("group: store has no append path: %w", kerr.CoordinatorNotAvailable)
	}
	m := s.writeLock(partition)
	m.Lock()
	defer m.Unlock()
	base := int64(-1)
	err := s.append(ctx, partition, b, func(off int64) {
		base = off
		if appended != nil {
			s.mu.Lock()
			appended(off)
			s.mu.Unlock()
		}
	})
	if err != nil {
		if failed != nil && base >= 0 {
			s.mu.Lock()
			failed(base)
			s.mu.Unlock()
		}
		return err
	}
	s.mu.Lock()
	install(base)
	s.mu.Unlock()
	return nil
}

func (s *Store) writeRecords(ctx context.Context, partition int32, recs []KV, install func(base int64)) error {
	if len(recs) == 0 {
		return ErrNoRecords
	}
	return s.write(ctx, partition, BuildBatch(recs, s.now().UnixMilli()), install, nil, nil)
}

// Commit appends the offsets of group (on __consumer_offsets partition)
// as one batch and, once appended, makes them visible. Either all are
// committed or none.
func (s *Store) Commit(ctx context.Context, partition int32, group string, commits []Commit) error {
	recs := make([]KV, len(commits))
	for i := range commits {
		recs[i] = OffsetCommitRecord(group, commits[i].Topic, commits[i].Partition, &commits[i].Offset)
	}
	return s.writeRecords(ctx, partition, recs, func(base int64) {
		for i, c := range commits {
			s.putLocked(partition, group, c.TopicPartition, rec{c.Offset, base + int64(i)})
		}
	})
}

// CommitTxn appends the offsets of group as one transactional batch of
// producerID at producerEpoch (attributes 0x10, base sequence 0, as
// Kafka's coordinator writes TxnOffsetCommit) and holds them pending for
// that producer from the moment the batch is in the local log (so a
// marker appended after it finds them): they become visible only through
// CompleteTxn. If the append fails, the offsets are no longer pending.
func (s *Store) CommitTxn(ctx context.Context, partition int32, group string, producerID int64, producerEpoch int16, commits []Commit) error {
	if len(commits) == 0 {
		return ErrNoRecords
	}
	recs := make([]KV, len(commits))
	for i := range commits {
		recs[i] = OffsetCommitRecord(group, commits[i].Topic, commits[i].Partition, &commits[i].Offset)
	}
	b := BuildTxnBatch(recs, s.now().UnixMilli(), producerID, producerEpoch)
	return s.write(ctx, partition, b, func(int64) {}, func(base int64) {
		for i, c := range commits {
			s.putPendingLocked(partition, producerID, group, c.TopicPartition, rec{c.Offset, base + int64(i)})
		}
	}, func(base int64) {
		g := s.pending[partition][producerID][group]
		for i, c := range commits {
			if r, ok := g[c.TopicPartition]; ok && r.at == base+int64(i) {
				delete(g, c.TopicPartition)
			}
		}
		s.prunePendingLocked(partition, producerID, group)
	})
}

// putLocked installs r as group's committed offset of tp unless the
// committed one is from a newer record.
func (s *Store) putLocked(partition int32, group string, tp TopicPartition, r rec) {
	g := s.offsets[group]
	if g == nil {
		g = map[TopicPartition]rec{}
		s.offsets[group] = g
	}
	if cur, ok := g[tp]; !ok || r.at < 0 || cur.at < r.at {
		g[tp] = r
	}
	s.owner[group] = partition
}

func (s *Store) putPendingLocked(partition int32, producerID int64, group string, tp TopicPartition, r rec) {
	byPID := s.pending[partition]
	if byPID == nil {
		byPID = map[int64]map[string]map[TopicPartition]rec{}
		s.pending[partition] = byPID
	}
	byGroup := byPID[producerID]
	if byGroup == nil {
		byGroup = map[string]map[TopicPartition]rec{}
		byPID[producerID] = byGroup
	}
	g := byGroup[group]
	if g == nil {
		g = map[TopicPartition]rec{}
		byGroup[group] = g
	}
	g[tp] = r
	s.owner[group] = partition
}

// prunePendingLocked drops the empty maps of a producer's pending offsets.
func (s *Store) prunePendingLocked(partition int32, producerID int64, group string) {
	byPID := s.pending[partition]
	if byPID == nil {
		return
	}
	if byGroup := byPID[producerID]; byGroup != nil {
		if len(byGroup[group]) == 0 {
			delete(byGroup, group)
		}
		if len(byGroup) == 0 {
			delete(byPID, producerID)
		}
	}
	if len(byPID) == 0 {
		delete(s.pending, partition)
	}
}

// CompleteTxn applies producerID's COMMIT (commit true) or ABORT marker
// on partition to the pending offsets whose records are below before (the
// partition's log end when the marker was known durable: offsets of the
// producer's next transaction, written after, are not touched). On
// commit each becomes the committed offset unless a newer record
// committed one; on abort they are dropped. Completing a producer with
// nothing pending does nothing, so a repeated marker is harmless. While
// the partition is being loaded the completion is also remembered and
// applied again when the load finishes (its transactional records may not
// have been replayed yet).
func (s *Store) CompleteTxn(partition int32, producerID int64, commit bool, before int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.loading[partition]; ok {
		s.loading[partition] = append(l, completion{producerID, commit, before})
	}
	s.completeLocked(partition, completion{producerID, commit, before})
}

func (s *Store) completeLocked(partition int32, c completion) {
	byGroup := s.pending[partition][c.producerID]
	for group, tps := range byGroup {
		for tp, r := range tps {
			if r.at >= c.before {
				continue
			}
			if c.commit {
				s.putLocked(partition, group, tp, r)
			}
			delete(tps, tp)
		}
		s.prunePendingLocked(partition, c.producerID, group)
	}
}

// dropPendingLocked forgets every producer's pending offset of group's tp
// (a tombstone for it was written: Kafka drops them too).
func (s *Store) dropPendingLocked(partition int32, group string, tp TopicPartition) {
	for pid, byGroup := range s.pending[partition] {
		if g := byGroup[group]; g != nil {
			delete(g, tp)
			s.prunePendingLocked(partition, pid, group)
		}
	}
}

// pendingTPsLocked returns the partitions of group with pending
// transactional offsets.
func (s *Store) pendingTPsLocked(group string) map[TopicPartition]bool {
	p, ok := s.owner[group]
	if !ok {
		return nil
	}
	var out map[TopicPartition]bool
	for _, byGroup := range s.pending[p] {
		for tp := range byGroup[group] {
			if out == nil {
				out = map[TopicPartition]bool{}
			}
			out[tp] = true
		}
	}
	return out
}

// Pending reports whether group has a pending transactional offset for
// tp (OffsetFetch's RequireStable answers UNSTABLE_OFFSET_COMMIT then).
func (s *Store) Pending(group string, tp TopicPartition) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pendingTPsLocked(group)[tp]
}

// DeleteOffsets appends tombstones for the given offsets of group and
// forgets them once appended, with any pending transactional offset of
// those partitions (as Kafka's tombstone replay does). Partitions with
// neither a committed nor a pending offset are skipped (nothing to
// delete).
func (s *Store) DeleteOffsets(ctx context.Context, partition int32, group string, tps []TopicPartition) error {
	var recs []KV
	var del []TopicPartition
	s.mu.RLock()
	pend := s.pendingTPsLocked(group)
	for _, tp := range tps {
		if _, ok := s.offsets[group][tp]; ok || pend[tp] {
			recs = append(recs, OffsetCommitRecord(group, tp.Topic, tp.Partition, nil))
			del = append(del, tp)
		}
	}
	s.mu.RUnlock()
	if len(recs) == 0 {
		return nil
	}
	return s.writeRecords(ctx, partition, recs, func(int64) {
		for _, tp := range del {
			s.deleteLocked(partition, group, tp)
		}
	})
}

func (s *Store) deleteLocked(partition int32, group string, tp TopicPartition) {
	delete(s.offsets[group], tp)
	if len(s.offsets[group]) == 0 {
		delete(s.offsets, group)
	}
	s.dropPendingLocked(partition, group, tp)
}

// StoreGroup implements [Persister]: it appends g's GroupMetadata record.
func (s *Store) StoreGroup(ctx context.Context, partition int32, g GroupSnapshot) error {
	return s.writeRecords(ctx, partition, []KV{GroupMetadataRecord(g, false)}, func(int64) { s.owner[g.Group] = partition })
}

// DeleteGroup implements [Persister]: it appends tombstones for the
// group's metadata and every offset it committed or has pending in a
// transaction (Kafka's deleteAllOffsets), and forgets them.
func (s *Store) DeleteGroup(ctx context.Context, partition int32, group string) error {
	recs := []KV{}
	s.mu.RLock()
	tps := map[TopicPartition]rec{}
	for tp, r := range s.offsets[group] {
		tps[tp] = r
	}
	for tp := range s.pendingTPsLocked(group) {
		tps[tp] = rec{}
	}
	all := sortedTPs(tps)
	for _, tp := range all {
		recs = append(recs, OffsetCommitRecord(group, tp.Topic, tp.Partition, nil))
	}
	s.mu.RUnlock()
	recs = append(recs, GroupMetadataRecord(GroupSnapshot{Group: group}, true))
	return s.writeRecords(ctx, partition, recs, func(int64) {
		for _, tp := range all {
			s.dropPendingLocked(partition, group, tp)
		}
		delete(s.offsets, group)
		delete(s.owner, group)
	})
}

// Fetch returns group's committed offset of tp.
func (s *Store) Fetch(group string, tp TopicPartition) (Offset, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.offsets[group][tp]
	return o.Offset, ok
}

// FetchAll returns every committed offset of group, sorted by topic and
// partition.
func (s *Store) FetchAll(group string) []Commit {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.offsets[group]
	out := make([]Commit, 0, len(g))
	for _, tp := range sortedTPs(g) {
		out = append(out, Commit{TopicPartition: tp, Offset: g[tp].Offset})
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
			fn(g, tp, o.Offset)
		}
	}
}

// Apply installs one record read back from partition's log during a load
// (the newest record of a key wins, as the log is replayed in order), at
// log offset at (-1: unknown, installed as the newest).
func (s *Store) Apply(partition int32, e Entry, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.IsOffset && e.Deleted:
		s.deleteLocked(partition, e.Group, TopicPartition{e.Topic, e.Partition})
	case e.IsOffset:
		s.putLocked(partition, e.Group, TopicPartition{e.Topic, e.Partition}, rec{e.Offset, at})
	case e.Deleted:
		delete(s.owner, e.Group)
	default:
		s.owner[e.Group] = partition
	}
}

// applyPending installs one transactional offset record of producerID
// read back from partition's log at offset at, pending until the
// producer's marker is replayed (or written).
func (s *Store) applyPending(partition int32, producerID int64, e Entry, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tp := TopicPartition{e.Topic, e.Partition}
	if e.Deleted {
		// Kafka's coordinator never writes a transactional tombstone; one
		// read back deletes like a plain one would once committed: keep
		// it simple and treat it as the plain tombstone.
		s.deleteLocked(partition, e.Group, tp)
		return
	}
	s.putPendingLocked(partition, producerID, e.Group, tp, rec{e.Offset, at})
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
	delete(s.pending, partition)
	delete(s.loading, partition)
}

// ExpireOffsets removes, with tombstones, the offsets that have expired at
// now: with Kafka 2.1+ semantics (KIP-211), an offset with an explicit
// ExpireTimestamp expires then; otherwise an offset expires retention
// after its commit if expirable(group, topic) says so: the caller answers
// true for groups without members (Empty, or unknown to the membership)
// and, KIP-496, for topics no member of a consumer group subscribes to. An
// offset with a pending transactional offset for its partition does not
// expire (Kafka's cleanupExpiredOffsets). It returns how many offsets it
// removed; a group whose tombstones fail to append keeps its offsets
// (tried again next time). emptied lists the groups left with no offsets
// at all and none pending, with their partitions (the caller may then
// remove an Empty group, as Kafka does).
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
		pend := s.pendingTPsLocked(g)
		var tps []TopicPartition
		for _, tp := range sortedTPs(m) {
			o := m[tp]
			switch {
			case pend[tp]:
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
		left := len(s.offsets[v.group]) + len(s.pendingTPsLocked(v.group))
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

// GroupsOf returns the groups of partition that have committed or
// pending offsets, sorted.
func (s *Store) GroupsOf(partition int32) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]bool{}
	for g := range s.offsets {
		if s.owner[g] == partition {
			seen[g] = true
		}
	}
	for _, byGroup := range s.pending[partition] {
		for g := range byGroup {
			seen[g] = true
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedTPs(m map[TopicPartition]rec) []TopicPartition {
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

// AppendRecords appends recs (already encoded, say a consumer group's
// records 3-8) to partition's log as one batch, in the order of the
// partition's other writes, and returns once the batch is appended (as
// durable as a commit), or the append's error.
func (s *Store) AppendRecords(ctx context.Context, partition int32, recs []KV) error {
	return s.writeRecords(ctx, partition, recs, func(int64) {})
}
