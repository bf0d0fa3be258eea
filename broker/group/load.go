package group

// Loading a __consumer_offsets partition: the broker reads the partition's
// log from its start, batch by batch, and hands each batch to a [Loader];
// the loader installs offsets in the [Store] as it goes and keeps the
// newest GroupMetadata record of each group (or its tombstone); Finish
// hands those to the membership state machine. Offsets of a partition
// are visible only once the broker marks it loaded (requests meanwhile get
// COORDINATOR_LOAD_IN_PROGRESS), so a half-replayed state is never served.

// Loader replays one partition's records. It is not safe for concurrent
// use: one goroutine loads one partition.
type Loader struct {
	store     *Store
	partition int32
	groups    map[string]*GroupSnapshot // nil value: tombstoned
	order     []string
	// Records counts the records replayed; Skipped those of unknown key
	// versions.
	Records, Skipped int
}

// NewLoader starts the load of partition into store. It first forgets
// whatever store held for the partition (a reload starts from nothing).
func NewLoader(store *Store, partition int32) *Loader {
	store.Unload(partition)
	return &Loader{store: store, partition: partition, groups: map[string]*GroupSnapshot{}}
}

// Batch replays one whole record batch read from the log.
func (l *Loader) Batch(b []byte) error {
	return DecodeBatch(b, func(_ int64, e Entry) error {
		l.Records++
		l.store.Apply(l.partition, e)
		if e.IsOffset {
			return nil
		}
		if _, seen := l.groups[e.Group]; !seen {
			l.order = append(l.order, e.Group)
		}
		if e.Deleted {
			l.groups[e.Group] = nil
			return nil
		}
		g := e.Snapshot
		l.groups[e.Group] = &g
		return nil
	})
}

// Finish calls fn with the newest snapshot of each group seen, in first-seen
// order; a group whose newest record is a tombstone comes as a snapshot
// with only Group set and nil Members (the contract's "remove").
func (l *Loader) Finish(fn func(partition int32, g GroupSnapshot)) {
	for _, name := range l.order {
		g := l.groups[name]
		if g == nil {
			fn(l.partition, GroupSnapshot{Group: name})
			continue
		}
		fn(l.partition, *g)
	}
}
