package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/storage/vfs"
)

// UndefinedEpoch and UndefinedEpochOffset are what EndOffsetFor answers for
// an epoch it cannot place (Kafka's UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// ErrInvalidEpoch is returned by Assign for a negative epoch or start
// offset. Nothing changes.
var ErrInvalidEpoch = errors.New("checkpoint: invalid leader epoch entry")

// EpochEntry says that leader epoch Epoch wrote its first record at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// LeaderEpochCache is a partition's leader-epoch history, epoch → first
// offset written in it, oldest first, persisted in Kafka's
// leader-epoch-checkpoint format (version 0, "<epoch> <start offset>"
// lines). It answers OffsetForLeaderEpoch, lets a new follower find where
// its log diverges from the leader's, and follows the log when it is
// truncated at either end.
//
// Invariant: epochs strictly increase and start offsets strictly increase
// from entry to entry.
//
// Safe for concurrent use. Readers (Latest, EndOffsetFor, Entries) are
// lock-free: they load an immutable snapshot. Changes are serialized by mu,
// written to the file first and published after, so a failed write leaves
// both the file and the cache as they were (and returns the error: the
// caller treats it as a failed log directory).
type LeaderEpochCache struct {
	fs   vfs.FS
	path string

	mu      sync.Mutex                   // serializes changes and their persistence
	entries atomic.Pointer[[]EpochEntry] // immutable snapshot; replaced under mu
}

// OpenLeaderEpochCache loads the cache persisted at path. A missing file is
// an empty cache (the file is created by the first change). A file that does
// not parse, or whose entries break the invariant, returns an error wrapping
// ErrCorruptCheckpoint.
func OpenLeaderEpochCache(fs vfs.FS, path string) (*LeaderEpochCache, error) {
	lines, err := readFile(fs, path, 2)
	if err != nil {
		return nil, err
	}
	es := make([]EpochEntry, 0, len(lines))
	for i, l := range lines {
		epoch, err1 := strconv.ParseInt(l[0], 10, 32)
		start, err2 := strconv.ParseInt(l[1], 10, 64)
		switch {
		case err1 != nil || err2 != nil:
			return nil, fmt.Errorf("%w: %s: entry %d %q %q: bad number", ErrCorruptCheckpoint, path, i, clip(l[0]), clip(l[1]))
		case epoch < 0 || start < 0:
			return nil, fmt.Errorf("%w: %s: entry %d: negative epoch %d or offset %d", ErrCorruptCheckpoint, path, i, epoch, start)
		case i > 0 && (int32(epoch) <= es[i-1].Epoch || start <= es[i-1].StartOffset):
			return nil, fmt.Errorf("%w: %s: entry %d (%d, %d) does not follow (%d, %d)",
				ErrCorruptCheckpoint, path, i, epoch, start, es[i-1].Epoch, es[i-1].StartOffset)
		}
		es = append(es, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	c := &LeaderEpochCache{fs: fs, path: path}
	c.entries.Store(&es)
	return c, nil
}

func (c *LeaderEpochCache) load() []EpochEntry { return *c.entries.Load() }

// commitLocked persists es and then publishes it. mu held.
func (c *LeaderEpochCache) commitLocked(es []EpochEntry) error {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = strconv.FormatInt(int64(e.Epoch), 10) + " " + strconv.FormatInt(e.StartOffset, 10)
	}
	if err := writeFile(c.fs, c.path, lines); err != nil {
		return err
	}
	c.entries.Store(&es)
	return nil
}

// Assign records that epoch starts at startOffset, persisting the change.
// The log calls it for every appended batch and a new leader calls it with
// its log end offset, so it is cheap when nothing changes:
//
//   - an epoch at or below the latest epoch is ignored: the same epoch
//     continuing, or a stale assignment that must not rewrite history
//     (Kafka instead truncates the newer epochs and warns that this
//     "implies messages have arrived out of order");
//   - a newer epoch first drops any latest entries whose start offset is
//     at or above startOffset (epochs that wrote nothing before the next
//     one took over, as Kafka does), then is appended.
//
// A negative epoch or offset returns ErrInvalidEpoch.
func (c *LeaderEpochCache) Assign(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("%w: epoch %d, start offset %d", ErrInvalidEpoch, epoch, startOffset)
	}
	// Fast path without the lock: almost every call is the current epoch.
	if es := c.load(); len(es) > 0 && epoch <= es[len(es)-1].Epoch {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.load()
	if len(es) > 0 && epoch <= es[len(es)-1].Epoch {
		return nil
	}
	keep := len(es)
	for keep > 0 && es[keep-1].StartOffset >= startOffset {
		keep--
	}
	next := make([]EpochEntry, keep, keep+1)
	copy(next, es[:keep])
	next = append(next, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return c.commitLocked(next)
}

// Latest returns the latest epoch and its start offset, if any.
func (c *LeaderEpochCache) Latest() (epoch int32, startOffset int64, ok bool) {
	es := c.load()
	if len(es) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset, false
	}
	e := es[len(es)-1]
	return e.Epoch, e.StartOffset, true
}

// EndOffsetFor answers OffsetForLeaderEpoch for requested epoch, with
// Kafka's semantics: the largest known epoch at or below requested, and the
// offset where it ended (the start of the next known epoch):
//
//   - requested is the latest epoch: (requested, logEndOffset);
//   - requested is below the first known epoch: (requested, first start
//     offset): the history below has been removed;
//   - otherwise (floor epoch, start offset of the first epoch above it);
//   - requested is UndefinedEpoch, above every known epoch, or the cache is
//     empty: (UndefinedEpoch, UndefinedEpochOffset).
func (c *LeaderEpochCache) EndOffsetFor(epoch int32, logEndOffset int64) (foundEpoch int32, endOffset int64) {
	es := c.load()
	if epoch == UndefinedEpoch || len(es) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if es[len(es)-1].Epoch == epoch {
		return epoch, logEndOffset
	}
	// higher: the first entry with an epoch above requested.
	higher, _ := slices.BinarySearchFunc(es, epoch+1, func(e EpochEntry, t int32) int {
		switch {
		case e.Epoch < t:
			return -1
		case e.Epoch > t:
			return 1
		}
		return 0
	})
	if higher == len(es) {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if higher == 0 {
		return epoch, es[0].StartOffset
	}
	return es[higher-1].Epoch, es[higher].StartOffset
}

// TruncateFromEnd drops every entry whose start offset is at or above
// endOffset: the log was truncated to endOffset. A negative endOffset does
// nothing.
func (c *LeaderEpochCache) TruncateFromEnd(endOffset int64) error {
	if endOffset < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.load()
	keep := len(es)
	for keep > 0 && es[keep-1].StartOffset >= endOffset {
		keep--
	}
	if keep == len(es) {
		return nil
	}
	return c.commitLocked(slices.Clone(es[:keep]))
}

// TruncateFromStart follows the log start moving up to startOffset: the
// entries starting at or below it are replaced by the latest of them, moved
// up to start at startOffset (its epoch still covers the new first offset).
// A negative startOffset does nothing.
func (c *LeaderEpochCache) TruncateFromStart(startOffset int64) error {
	if startOffset < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.load()
	below := 0
	for below < len(es) && es[below].StartOffset <= startOffset {
		below++
	}
	if below == 0 || (below == 1 && es[0].StartOffset == startOffset) {
		return nil
	}
	next := make([]EpochEntry, 0, len(es)-below+1)
	next = append(next, EpochEntry{Epoch: es[below-1].Epoch, StartOffset: startOffset})
	next = append(next, es[below:]...)
	return c.commitLocked(next)
}

// Clear removes every entry (the log was emptied and restarted at a new
// offset) and persists the empty cache.
func (c *LeaderEpochCache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commitLocked([]EpochEntry{})
}

// Reset replaces every entry with es (a log rebuilt from the remote
// tier takes the leader's history up to its new start), persisting them
// in one write. es must hold the invariant (epochs and start offsets
// strictly increasing, none negative), else ErrInvalidEpoch and nothing
// changes.
func (c *LeaderEpochCache) Reset(es []EpochEntry) error {
	for i, e := range es {
		if e.Epoch < 0 || e.StartOffset < 0 || i > 0 && (e.Epoch <= es[i-1].Epoch || e.StartOffset <= es[i-1].StartOffset) {
			return fmt.Errorf("%w: entry %d (%d, %d) in a reset", ErrInvalidEpoch, i, e.Epoch, e.StartOffset)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commitLocked(slices.Clone(es))
}

// Entries returns a copy of the entries, oldest first.
func (c *LeaderEpochCache) Entries() []EpochEntry { return slices.Clone(c.load()) }

// Path returns the checkpoint file's path.
func (c *LeaderEpochCache) Path() string { return c.path }
