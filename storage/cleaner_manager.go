package storage

import (
	"errors"
	"maps"
	"math"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/storage/checkpoint"
)

// cleanerManager is the Manager's half of compaction (Kafka's
// LogCleanerManager + CleanerThreads): it picks the dirtiest compacted
// log, runs [Log.clean] on it, keeps each log's first dirty offset in
// cleaner-offset-checkpoint and counts what it did for [Manager.CleanerStats].
//
// Lock order: cleanerManager.mu is a leaf: never held while calling into a
// Log or the Manager.
type cleanerManager struct {
	m        *Manager
	throttle *throttler

	mu         sync.Mutex // guards firstDirty, ratios, expiries, inProgress
	firstDirty map[checkpoint.TopicPartition]int64
	ratios     map[checkpoint.TopicPartition]float64
	expiries   map[checkpoint.TopicPartition]int64 // when the log's oldest kept tombstone expires (ms)
	inProgress map[*Log]bool

	runs, bytesRead, bytesWritten, failures atomic.Int64
	cpMu                                    sync.Mutex // serializes checkpoint writes
}

// CleanerStats are the log cleaner's counters since the Manager opened
// (read by the broker's metrics at scrape time).
type CleanerStats struct {
	Runs         int64 // cleanings that rewrote at least one group of segments
	Failures     int64 // cleanings that failed (aborted ones excluded)
	BytesRead    int64
	BytesWritten int64
	Logs         []LogCleanerStats // compacted logs, ordered by topic and partition
}

// LogCleanerStats is one compacted log's state in the cleaner.
type LogCleanerStats struct {
	Topic            string
	Partition        int32
	FirstDirtyOffset int64
	DirtyRatio       float64 // dirty bytes / cleanable bytes, as last computed
}

func newCleanerManager(m *Manager) (*cleanerManager, error) {
	c := &cleanerManager{
		m: m, throttle: newThrottler(m.opts.CleanerIOMaxBytesPerSecond),
		ratios: map[checkpoint.TopicPartition]float64{}, inProgress: map[*Log]bool{},
		expiries: map[checkpoint.TopicPartition]int64{},
	}
	c.firstDirty = map[checkpoint.TopicPartition]int64{}
	for _, d := range m.dirs {
		fd, err := checkpoint.ReadOffsets(m.opts.FS, filepath.Join(d.path, CleanerCheckpointFile))
		if err != nil {
			// Losing it costs a re-cleaning of clean data, nothing more.
			m.opts.Logger.Warn("storage: cleaner checkpoint unreadable", "dir", d.path, "err", err)
			continue
		}
		maps.Copy(c.firstDirty, fd)
	}
	return c, nil
}

func tpOf(l *Log) checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: l.topic, Partition: l.partition}
}

// firstDirtyOf returns the log's first dirty offset, clamped into the log
// (a checkpoint from before a truncation or a re-creation may lie outside).
func (c *cleanerManager) firstDirtyOf(l *Log) int64 {
	c.mu.Lock()
	fd, ok := c.firstDirty[tpOf(l)]
	c.mu.Unlock()
	segs := l.segments()
	if !ok || fd < segs[0].base || fd > l.LogEndOffset() {
		fd = segs[0].base
	}
	return fd
}

// grab picks the compacted log most in need of cleaning and marks it in
// progress: the highest dirty ratio at or above min.cleanable.dirty.ratio,
// or any log with a dirty segment past max.compaction.lag.ms.
func (c *cleanerManager) grab(now time.Time) (*Log, int64, bool) {
	var (
		best       *Log
		bestFD     int64
		bestRatio  = -1.0
		bestExpire bool
	)
	for _, l := range c.m.Logs() {
		cfg := l.Config()
		if !cfg.Compact() || l.Failed() || l.closed.Load() {
			continue
		}
		fd := c.firstDirtyOf(l)
		ratio, overdue := l.dirtyRatio(fd, now)
		c.mu.Lock()
		c.ratios[tpOf(l)] = ratio
		busy := c.inProgress[l]
		exp, hasExp := c.expiries[tpOf(l)]
		c.mu.Unlock()
		// Kept tombstones past delete.retention.ms make a log cleanable
		// even without dirty data (Kafka: KIP-534).
		expire := hasExp && exp <= now.UnixMilli()
		if busy || (ratio < cfg.MinCleanableDirtyRatio && !overdue && !expire) || (ratio == 0 && !expire) {
			continue
		}
		if overdue {
			ratio += 1 // overdue logs first
		}
		if ratio > bestRatio {
			best, bestFD, bestRatio, bestExpire = l, fd, ratio, expire
		}
	}
	if best != nil {
		c.mu.Lock()
		if c.inProgress[best] {
			best = nil
		} else {
			c.inProgress[best] = true
		}
		c.mu.Unlock()
	}
	return best, bestFD, bestExpire
}

// cleanOne cleans the dirtiest log, if any; it reports whether it found one.
func (c *cleanerManager) cleanOne(stop <-chan struct{}) bool {
	now := c.m.opts.Now()
	l, fd, expire := c.grab(now)
	if l == nil {
		return false
	}
	defer func() {
		c.mu.Lock()
		delete(c.inProgress, l)
		c.mu.Unlock()
	}()
	res, err := l.clean(cleanParams{
		firstDirty: fd, now: now, dedupeBytes: c.m.opts.CleanerDedupeBufferSize / int64(c.m.opts.CleanerThreads),
		throttle: c.throttle, stop: stop, expireTombstones: expire,
	})
	c.bytesRead.Add(res.bytesRead)
	c.bytesWritten.Add(res.bytesWritten)
	switch {
	case errors.Is(err, errCleanAborted):
		return true
	case err != nil:
		c.failures.Add(1)
		c.m.opts.Logger.Warn("storage: log cleaner", "dir", l.dir, "err", err)
		// Do not pick the same log again at once: move past it only if the
		// log latched (it is offline), else retry after the backoff.
		return false
	}
	if res.groups > 0 {
		c.runs.Add(1)
	}
	c.mu.Lock()
	c.firstDirty[tpOf(l)] = res.firstDirty
	c.ratios[tpOf(l)], _ = l.dirtyRatio(res.firstDirty, now)
	if res.groups > 0 {
		if res.tombstoneExpiry == math.MaxInt64 {
			delete(c.expiries, tpOf(l))
		} else {
			c.expiries[tpOf(l)] = res.tombstoneExpiry
		}
	}
	c.mu.Unlock()
	c.writeCheckpoint()
	c.m.opts.Logger.Debug("storage: log cleaned", "dir", l.dir, "first_dirty", res.firstDirty,
		"groups", res.groups, "read", res.bytesRead, "written", res.bytesWritten, "dirty_ratio_before", res.dirtyRatio)
	return true
}

// writeCheckpoint writes cleaner-offset-checkpoint for the loaded logs.
func (c *cleanerManager) writeCheckpoint() {
	c.cpMu.Lock()
	defer c.cpMu.Unlock()
	dirOf := map[checkpoint.TopicPartition]string{}
	for _, l := range c.m.Logs() {
		dirOf[tpOf(l)] = filepath.Dir(l.dir)
	}
	out := map[string]map[checkpoint.TopicPartition]int64{}
	c.mu.Lock()
	for tp, o := range c.firstDirty {
		if d, ok := dirOf[tp]; ok {
			if out[d] == nil {
				out[d] = map[checkpoint.TopicPartition]int64{}
			}
			out[d][tp] = o
		}
	}
	c.mu.Unlock()
	for _, d := range c.m.dirs {
		if d.failed.Load() {
			continue
		}
		if err := checkpoint.WriteOffsets(c.m.opts.FS, filepath.Join(d.path, CleanerCheckpointFile), out[d.path]); err != nil {
			c.m.opts.Logger.Warn("storage: write cleaner checkpoint", "dir", d.path, "err", err)
		}
	}
}

// forget drops a deleted log's state.
func (c *cleanerManager) forget(tp checkpoint.TopicPartition) {
	c.mu.Lock()
	delete(c.firstDirty, tp)
	delete(c.ratios, tp)
	delete(c.expiries, tp)
	c.mu.Unlock()
}

// run is one cleaner thread: clean while there is work, else back off.
func (c *cleanerManager) run(stop <-chan struct{}) {
	for {
		if c.cleanOne(stop) {
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		t := time.NewTimer(c.m.opts.CleanerBackoff)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (c *cleanerManager) stats() CleanerStats {
	s := CleanerStats{
		Runs: c.runs.Load(), Failures: c.failures.Load(),
		BytesRead: c.bytesRead.Load(), BytesWritten: c.bytesWritten.Load(),
	}
	for _, l := range c.m.Logs() {
		if !l.Config().Compact() {
			continue
		}
		tp := tpOf(l)
		fd := c.firstDirtyOf(l)
		c.mu.Lock()
		r := c.ratios[tp]
		c.mu.Unlock()
		s.Logs = append(s.Logs, LogCleanerStats{Topic: tp.Topic, Partition: tp.Partition, FirstDirtyOffset: fd, DirtyRatio: r})
	}
	sort.Slice(s.Logs, func(i, j int) bool {
		if s.Logs[i].Topic != s.Logs[j].Topic {
			return s.Logs[i].Topic < s.Logs[j].Topic
		}
		return s.Logs[i].Partition < s.Logs[j].Partition
	})
	return s
}

// CleanerStats returns the log cleaner's counters and each compacted log's
// dirty ratio. Safe for concurrent use.
func (m *Manager) CleanerStats() CleanerStats { return m.cleaner.stats() }

// RunCleaner cleans, one after the other, every compacted log whose dirty
// ratio reaches min.cleanable.dirty.ratio (or that is past
// max.compaction.lag.ms), as the cleaner threads would, and returns how
// many cleanings ran. For tests and tools; the threads started by Start
// do the same in the background.
func (m *Manager) RunCleaner() int {
	n := 0
	for range 1000 {
		if !m.cleaner.cleanOne(m.stop) {
			break
		}
		n++
	}
	return n
}
