package storage

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// logDir is one of the Manager's data directories (log.dirs): its lock,
// whether it failed (an I/O error took it offline for good, until a
// restart) and whether it is full (appends refused until free space is
// back above MinFreeBytes).
type logDir struct {
	path  string
	lock  io.Closer
	clean bool // the clean-shutdown marker was present at open

	failed  atomic.Bool
	failErr atomic.Pointer[error]
	full    atomic.Bool
	free    atomic.Int64 // last measured free bytes; -1 unknown

	fullMu sync.Mutex // serializes full's transitions (and their log lines)
}

// DirState describes one data directory ([Manager.Dirs]).
type DirState struct {
	Path      string
	Failed    bool  // offline after an I/O error: its logs refuse everything
	Err       error // the failure, if Failed
	Full      bool  // appends refused with ErrLogDirFull
	FreeBytes int64 // last measured free space; -1 if unknown
	Logs      int   // logs it holds
}

// Dirs returns the state of every data directory, in log.dirs order.
func (m *Manager) Dirs() []DirState {
	count := map[string]int{}
	for _, l := range m.Logs() {
		count[filepath.Dir(l.dir)]++
	}
	out := make([]DirState, len(m.dirs))
	for i, d := range m.dirs {
		out[i] = DirState{Path: d.path, Failed: d.failed.Load(), Full: d.full.Load(), FreeBytes: d.free.Load(), Logs: count[d.path]}
		if e := d.failErr.Load(); e != nil {
			out[i].Err = *e
		}
	}
	return out
}

// DirOf returns the data directory holding l.
func (m *Manager) DirOf(l *Log) string { return filepath.Dir(l.dir) }

// noSpaceErr reports whether err is the file system running out of space.
// An fsync failure never counts: after it, written data may be gone.
func noSpaceErr(err error) bool {
	if errors.Is(err, errFsync) {
		return false
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// failDir takes d offline: every log in it latches failed (reads of
// already-open segments go on, as Kafka serves nothing from an offline
// dir but we keep what is safe), and once no directory is left, Failed
// receives.
func (m *Manager) failDir(d *logDir, err error) {
	if !d.failed.CompareAndSwap(false, true) {
		return
	}
	d.failErr.Store(&err)
	m.opts.Logger.Error("storage: data directory failed", "dir", d.path, "err", err)
	// Latch the directory's other logs outside the caller's lock: err may
	// come from a log's failLocked, holding that log's mu.
	go func() {
		for _, l := range m.Logs() {
			if filepath.Dir(l.dir) == d.path {
				l.latch(fmt.Errorf("data directory %s failed: %w", d.path, err))
			}
		}
	}()
	for _, o := range m.dirs {
		if !o.failed.Load() {
			return
		}
	}
	m.failOnce.Do(func() { m.failed <- fmt.Errorf("storage: every data directory failed, the last: %w", err) })
}

// ioError classifies an error of a directory-level write (a checkpoint):
// out of space marks the directory full, anything else fails it.
func (m *Manager) ioError(d *logDir, err error) {
	if noSpaceErr(err) {
		m.noSpace(d, err)
		return
	}
	m.failDir(d, err)
}

// noSpace marks d full after a write failed with ENOSPC.
func (m *Manager) noSpace(d *logDir, err error) {
	d.fullMu.Lock()
	defer d.fullMu.Unlock()
	if d.full.Swap(true) {
		return
	}
	m.opts.Logger.Warn("storage: data directory full, appends refused until free space is back",
		"dir", d.path, "min_free_bytes", m.opts.MinFreeBytes, "err", err)
}

// measureFree reads d's free space and sets or clears full against
// MinFreeBytes. A failed statfs changes nothing.
func (m *Manager) measureFree(d *logDir) {
	if d.failed.Load() {
		return
	}
	n, err := m.opts.FS.FreeSpace(d.path)
	if err != nil {
		return
	}
	d.free.Store(n)
	d.fullMu.Lock()
	defer d.fullMu.Unlock()
	switch below := n < m.opts.MinFreeBytes; {
	case below && !d.full.Load():
		d.full.Store(true)
		m.opts.Logger.Warn("storage: data directory low on space, appends refused until free space is back",
			"dir", d.path, "free_bytes", n, "min_free_bytes", m.opts.MinFreeBytes)
	case !below && d.full.Load():
		d.full.Store(false)
		m.opts.Logger.Info("storage: data directory has space again, appends resumed",
			"dir", d.path, "free_bytes", n, "min_free_bytes", m.opts.MinFreeBytes)
	}
}

// checkFree measures every directory; while one is full, retention runs
// on its logs at each check rather than every log.retention.check.interval
// (a tiered log whose uploads caught up frees its uploaded segments).
func (m *Manager) checkFree() {
	for _, d := range m.dirs {
		m.measureFree(d)
		if !d.full.Load() {
			continue
		}
		now := m.opts.Now()
		freed := 0
		for _, l := range m.Logs() {
			if filepath.Dir(l.dir) == d.path {
				n, _ := l.EnforceRetention(now)
				freed += n
			}
		}
		if freed > 0 {
			m.measureFree(d)
		}
	}
}

// placeLocked picks the directory of a new log: among those not failed,
// the one holding the fewest logs, as Kafka does (full ones only if every
// healthy one is full). m.mu held.
func (m *Manager) placeLocked() (*logDir, error) {
	count := map[string]int{}
	for _, l := range m.logs {
		count[filepath.Dir(l.dir)]++
	}
	var best *logDir
	better := func(d *logDir) bool {
		if best == nil {
			return true
		}
		if bf, df := best.full.Load(), d.full.Load(); bf != df {
			return bf
		}
		return count[d.path] < count[best.path]
	}
	for _, d := range m.dirs {
		if !d.failed.Load() && better(d) {
			best = d
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: every data directory is offline", ErrLogFailed)
	}
	return best, nil
}
