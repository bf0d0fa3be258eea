package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/vfs"
)

// ManagerOptions configure [OpenManager].
type ManagerOptions struct {
	Dir     string           // the data directory (the first of Dirs when both are set)
	Dirs    []string         // every data directory (log.dirs, JBOD); Dir is added first if set
	FS      vfs.FS           // nil = vfs.Default
	Default Config           // config of logs whose topic has none set by UpdateConfig
	Now     func() time.Time // nil = time.Now
	Logger  *slog.Logger     // nil = discard

	RetentionCheckInterval time.Duration // log.retention.check.interval.ms (5 min)
	FlushCheckInterval     time.Duration // log.flush.scheduler.interval.ms (1 s here; Kafka: never)
	CheckpointInterval     time.Duration // log.flush.offset.checkpoint.interval.ms (1 min)
	// HighWatermarkCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms (5 s; 0 = 5 s): how
	// often replication-offset-checkpoint is written.
	HighWatermarkCheckpointInterval time.Duration
	RecoveryThreads                 int // num.recovery.threads.per.data.dir (default 2)

	// Full disks (dirs.go). Appends to a directory are refused with
	// ErrLogDirFull while its free space is below MinFreeBytes, or after a
	// write failed with ENOSPC, until a check finds at least MinFreeBytes
	// free again; reads, deletes and retention go on.
	MinFreeBytes      int64         // strata.log.dir.min.free.bytes (0: only ENOSPC marks a dir full)
	FreeCheckInterval time.Duration // how often free space is measured (1 s)

	// Log compaction (cleaner.go, cleaner_manager.go).
	DisableCleaner             bool          // !log.cleaner.enable (Kafka default: enabled)
	CleanerThreads             int           // log.cleaner.threads (1)
	CleanerIOMaxBytesPerSecond float64       // log.cleaner.io.max.bytes.per.second (<= 0: unlimited, Kafka's Double.MAX_VALUE)
	CleanerDedupeBufferSize    int64         // log.cleaner.dedupe.buffer.size (128 MiB, shared by the threads)
	CleanerBackoff             time.Duration // log.cleaner.backoff.ms (15 s)

	// MaxOpenSealedSegments caps how many sealed segments of all the
	// directory's logs keep their files (three descriptors each) open;
	// the least recently used others are closed and reopened on demand
	// (filecache.go). 0: no cap, every segment's files stay open.
	MaxOpenSealedSegments int

	// ProducerSnapshot, if set, gives each log its snapshot function.
	ProducerSnapshot func(topic string, partition int32) func(int64) ([]byte, error)
	// TopicConfig, if set, gives the config of a topic found at load time
	// (ok=false: Default).
	TopicConfig func(topic string) (Config, bool)
}

// Manager owns one data directory: it loads every <topic>-<partition> log
// at start (in parallel), creates and deletes logs, runs the retention,
// flush and checkpoint loops, and writes the clean-shutdown marker when it
// closes. All methods are safe for concurrent use.
//
// Lock order: Manager.mu before nothing: it is never held while calling
// into a Log, whose own mu is taken by the Log's methods.
type Manager struct {
	opts ManagerOptions
	dirs []*logDir // log.dirs, in order

	mu      sync.Mutex // guards logs, configs, closed, vanished
	logs    map[checkpoint.TopicPartition]*Log
	configs map[string]Config
	closed  bool
	// vanished holds the checkpointed recovery point of each log the
	// recovery-point checkpoint lists but whose directory was not found
	// at open (removed while the node was down); see [Manager.Vanished].
	vanished map[checkpoint.TopicPartition]int64

	failOnce sync.Once
	failed   chan error // receives once every directory has failed

	files   *fileCache    // nil without MaxOpenSealedSegments
	cpMu    sync.Mutex    // serializes checkpoint writes
	cpKick  chan struct{} // a roll moved a recovery point: checkpoint soon (cap 1, coalescing)
	cleaner *cleanerManager
	stop    chan struct{}
	started bool
	wg      sync.WaitGroup

	// cleanEpoch is the broker epoch the clean-shutdown markers recorded
	// at open (-1: some directory had none, they disagree, or they were
	// empty): see [Manager.CleanShutdownBrokerEpoch]. brokerEpoch is what
	// Close writes into the markers ([Manager.SetBrokerEpoch]).
	cleanEpoch  int64
	brokerEpoch atomic.Int64
}

// CleanShutdownBrokerEpoch returns the broker epoch the clean-shutdown
// markers held when the manager opened: the epoch of the registration
// that last shut down cleanly, which the broker sends as BrokerRegistration's
// PreviousBrokerEpoch (KIP-966). -1 when any data directory had no marker
// (an unclean shutdown), an empty one (written before markers carried the
// epoch) or another epoch than the others.
func (m *Manager) CleanShutdownBrokerEpoch() int64 { return m.cleanEpoch }

// SetBrokerEpoch records the broker epoch of the current registration;
// Close writes it into the clean-shutdown markers. Safe for concurrent
// use; until called, Close writes -1.
func (m *Manager) SetBrokerEpoch(epoch int64) { m.brokerEpoch.Store(epoch) }

// OpenManager loads every log under o.Dir. Without the clean-shutdown
// marker each log recovers from its checkpointed recovery point; with it,
// logs reopen without rescanning. The marker is removed once everything is
// loaded, so a crash from here on is detected next time. Directories named
// <...>-delete are removed in the background, <...>-stray are left alone
// (see [Manager.MarkStray]); __cluster_metadata-<n> (the
// controller's Raft log, when metadata.log.dir is this directory) is
// skipped.
func OpenManager(o ManagerOptions) (*Manager, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetentionCheckInterval <= 0 {
		o.RetentionCheckInterval = 5 * time.Minute
	}
	if o.FlushCheckInterval <= 0 {
		o.FlushCheckInterval = time.Second
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = time.Minute
	}
	if o.RecoveryThreads <= 0 {
		o.RecoveryThreads = 2
	}
	if o.CleanerThreads <= 0 {
		o.CleanerThreads = 1
	}
	if o.CleanerDedupeBufferSize <= 0 {
		o.CleanerDedupeBufferSize = 128 << 20
	}
	if o.CleanerBackoff <= 0 {
		o.CleanerBackoff = 15 * time.Second
	}
	if o.FreeCheckInterval <= 0 {
		o.FreeCheckInterval = time.Second
	}
	paths, err := managerDirs(o)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		opts: o, logs: map[checkpoint.TopicPartition]*Log{}, configs: map[string]Config{},
		failed: make(chan error, 1), stop: make(chan struct{}), cpKick: make(chan struct{}, 1),
	}
	m.brokerEpoch.Store(-1)
	if o.MaxOpenSealedSegments > 0 {
		m.files = newFileCache(o.MaxOpenSealedSegments)
	}
	ok := false
	defer func() {
		if !ok {
			m.unlockDirs()
		}
	}()
	// Lock every directory before touching anything in it: a second
	// process on the same directories must not load (let alone recover)
	// the logs a live broker is writing.
	for _, p := range paths {
		if err := mkdirAllDurable(o.FS, p); err != nil {
			return nil, err
		}
		lk, err := o.FS.Lock(filepath.Join(p, LockFile))
		if err != nil {
			if errors.Is(err, vfs.ErrLocked) {
				return nil, fmt.Errorf("storage: log dir %s is in use by another process: %w", p, err)
			}
			return nil, fmt.Errorf("storage: lock log dir %s: %w", p, err)
		}
		d := &logDir{path: p, lock: lk}
		d.free.Store(-1)
		m.dirs = append(m.dirs, d)
	}
	type toLoad struct {
		tp    checkpoint.TopicPartition
		d     *logDir
		rp    int64
		lso   int64
		hw    int64
		clean bool
	}
	var loads []toLoad
	where := map[checkpoint.TopicPartition]string{}
	checkpointed := map[checkpoint.TopicPartition]int64{} // every dir's recovery points
	m.cleanEpoch = -1
	for i, d := range m.dirs {
		epoch, clean, err := ReadCleanShutdown(o.FS, d.path)
		if err != nil {
			o.Logger.Warn("storage: clean-shutdown marker unreadable, recovering as after a crash", "dir", d.path, "err", err)
		}
		d.clean = clean
		switch {
		case i == 0 && clean:
			m.cleanEpoch = epoch
		case !clean || epoch != m.cleanEpoch:
			m.cleanEpoch = -1
		}
	}
	// Until this life registers, a Close keeps the epoch it found: a node
	// stopping before it registered changed nothing the controller would
	// need to know of.
	m.brokerEpoch.Store(m.cleanEpoch)
	for _, d := range m.dirs {
		rps, err := checkpoint.ReadOffsets(o.FS, filepath.Join(d.path, RecoveryPointCheckpointFile))
		if err != nil {
			// A damaged checkpoint costs a full rescan, not the data.
			o.Logger.Warn("storage: recovery point checkpoint unreadable, rescanning", "dir", d.path, "err", err)
			rps, d.clean = map[checkpoint.TopicPartition]int64{}, false
		}
		lsos, err := checkpoint.ReadOffsets(o.FS, filepath.Join(d.path, LogStartOffsetCheckpointFile))
		if err != nil {
			o.Logger.Warn("storage: log start offset checkpoint unreadable", "dir", d.path, "err", err)
			lsos = map[checkpoint.TopicPartition]int64{}
		}
		hws, err := checkpoint.ReadOffsets(o.FS, filepath.Join(d.path, ReplicationOffsetCheckpointFile))
		if err != nil {
			// Only where a high watermark restarts from: the leader's
			// fetches bring it back.
			o.Logger.Warn("storage: replication offset checkpoint unreadable", "dir", d.path, "err", err)
			hws = map[checkpoint.TopicPartition]int64{}
		}
		for tp, rp := range rps {
			checkpointed[tp] = rp
		}
		names, err := o.FS.List(d.path)
		if err != nil {
			return nil, fmt.Errorf("storage: list data dir %s: %w", d.path, err)
		}
		for _, n := range names {
			p := filepath.Join(d.path, n)
			if strings.HasSuffix(n, DeleteDirSuffix) {
				m.removeInBackground(p)
				continue
			}
			st, err := o.FS.Stat(p)
			if err != nil || !st.IsDir() {
				continue
			}
			topic, part, ok := ParseLogDirName(n)
			if !ok || topic == MetadataTopic {
				continue
			}
			tp := checkpoint.TopicPartition{Topic: topic, Partition: part}
			if prev, dup := where[tp]; dup {
				// Kafka refuses to start with a partition in two dirs too.
				return nil, fmt.Errorf("storage: %s-%d is in both %s and %s", topic, part, prev, d.path)
			}
			where[tp] = d.path
			loads = append(loads, toLoad{tp: tp, d: d, rp: rps[tp], lso: lsos[tp], hw: hws[tp], clean: d.clean})
		}
		m.measureFree(d)
	}

	// Logs the checkpoint knows that are gone from disk: what they held
	// is lost locally, and the broker says so (Vanished).
	m.vanished = map[checkpoint.TopicPartition]int64{}
	for tp, rp := range checkpointed {
		if _, onDisk := where[tp]; onDisk {
			continue
		}
		if tp.Topic != MetadataTopic {
			m.vanished[tp] = rp
		}
	}

	// Load in parallel, RecoveryThreads at a time.
	loadStart := time.Now()
	var (
		wg    sync.WaitGroup
		resMu sync.Mutex
		errs  []error
	)
	sem := make(chan struct{}, o.RecoveryThreads)
	for _, ld := range loads {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cfg := o.Default
			if o.TopicConfig != nil {
				if c, ok := o.TopicConfig(ld.tp.Topic); ok {
					cfg = c
				}
			}
			lo := m.logOptions(ld.d, ld.tp, cfg, ld.rp, ld.lso, ld.clean)
			lo.HighWatermark = ld.hw
			l, err := OpenLog(lo)
			resMu.Lock()
			defer resMu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("storage: load %s-%d: %w", ld.tp.Topic, ld.tp.Partition, err))
				return
			}
			m.logs[ld.tp] = l
		}()
	}
	wg.Wait()
	for _, d := range m.dirs {
		if !d.clean {
			m.warnUncleanRecovery(d, time.Since(loadStart))
		}
	}
	if len(errs) > 0 {
		for _, l := range m.logs {
			l.Close()
		}
		m.wg.Wait()
		return nil, errors.Join(errs...)
	}
	if m.cleaner, err = newCleanerManager(m); err != nil {
		m.closeLogs()
		return nil, err
	}
	for _, d := range m.dirs {
		if !d.clean {
			continue
		}
		if err := o.FS.Remove(filepath.Join(d.path, CleanShutdownFile)); err != nil {
			m.closeLogs()
			return nil, fmt.Errorf("storage: remove clean-shutdown marker: %w", err)
		}
		if err := o.FS.SyncDir(d.path); err != nil {
			m.closeLogs()
			return nil, fmt.Errorf("storage: sync data dir: %w", err)
		}
	}
	ok = true
	return m, nil
}

// managerDirs returns o.Dir followed by o.Dirs, cleaned, without repeats.
func managerDirs(o ManagerOptions) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, p := range append([]string{o.Dir}, o.Dirs...) {
		if p == "" {
			continue
		}
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("storage: no data directory")
	}
	return out, nil
}

// warnUncleanRecovery logs, once for the directory d, that it was not
// shut down cleanly and what recovery did: how many logs and segments it
// rescanned and, summed over the logs, what it truncated (each log that
// lost data also logs its own warning with the offsets, in OpenLog).
func (m *Manager) warnUncleanRecovery(d *logDir, took time.Duration) {
	var logs, scanned, truncLogs, dropped int
	var bytes int64
	for _, l := range m.logs {
		if filepath.Dir(l.dir) != d.path {
			continue
		}
		logs++
		r := l.Recovery()
		scanned += r.SegmentsScanned
		if r.TruncatedBytes > 0 {
			truncLogs++
			bytes += r.TruncatedBytes
			dropped += r.DroppedSegments
		}
	}
	if logs == 0 {
		return
	}
	m.opts.Logger.Warn("storage: unclean shutdown, logs recovered", "dir", d.path,
		"logs", logs, "segments_rescanned", scanned, "logs_truncated", truncLogs,
		"truncated_bytes", bytes, "segments_dropped", dropped, "took", took.Round(time.Millisecond))
}

func (m *Manager) logOptions(d *logDir, tp checkpoint.TopicPartition, cfg Config, rp, lso int64, clean bool) LogOptions {
	o := LogOptions{
		Dir: filepath.Join(d.path, LogDirName(tp.Topic, tp.Partition)), Topic: tp.Topic, Partition: tp.Partition,
		FS: m.opts.FS, Config: cfg, Now: m.opts.Now, Logger: m.opts.Logger,
		RecoveryPoint: rp, LogStartOffset: lso, CleanShutdown: clean,
		OnFailure: func(err error) { m.failDir(d, err) },
		DirFull:   d.full.Load,
		OnNoSpace: func(err error) { m.noSpace(d, err) },
		// A truncation lowers the recovery point: checkpoint it at once,
		// or a crash would rescan with a stale, higher one and take the
		// torn tail of the new history for damage to flushed data.
		OnTruncate: func() { _ = m.Checkpoint() },
		// A roll fsynced the sealed segment and moved the recovery point
		// past it: checkpoint it soon (not under the log's lock), so a
		// crash rescans only the active segment rather than everything
		// since the last timed checkpoint (Kafka checkpoints at roll too).
		OnRoll: m.kickCheckpoint,
		files:  m.files,
	}
	if m.opts.ProducerSnapshot != nil {
		o.ProducerSnapshot = m.opts.ProducerSnapshot(tp.Topic, tp.Partition)
	}
	return o
}

// OpenSealedSegments returns how many sealed segments have their files
// open (-1 without MaxOpenSealedSegments: all of them).
func (m *Manager) OpenSealedSegments() int {
	if m.files == nil {
		return -1
	}
	return m.files.len()
}

// kickCheckpoint asks the checkpoint loop for a checkpoint without waiting.
func (m *Manager) kickCheckpoint() {
	select {
	case m.cpKick <- struct{}{}:
	default: // one is pending already: it will see this roll too
	}
}

// Failed returns a channel that receives an error once every data
// directory has failed (a write, fsync or rename error takes one
// directory, and only its logs, offline: Kafka's LogDirFailureChannel; a
// full disk does not). It never receives more than once.
func (m *Manager) Failed() <-chan error { return m.failed }

// GetOrCreate returns the log of topic/partition, creating it (empty,
// configured with cfg) if it does not exist. Idempotent. The topic
// [MetadataTopic] is refused: its directory is the controller's.
func (m *Manager) GetOrCreate(topic string, partition int32, cfg Config) (*Log, error) {
	tp := checkpoint.TopicPartition{Topic: topic, Partition: partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	if topic == "" || topic == MetadataTopic || strings.ContainsAny(topic, "/\\") || partition < 0 {
		return nil, fmt.Errorf("storage: invalid topic partition %q-%d", topic, partition)
	}
	m.configs[topic] = cfg
	d, err := m.placeLocked()
	if err != nil {
		return nil, err
	}
	l, err := OpenLog(m.logOptions(d, tp, cfg, 0, 0, true))
	if err != nil {
		return nil, err
	}
	if err := m.opts.FS.SyncDir(d.path); err != nil {
		l.Close()
		return nil, fmt.Errorf("storage: sync data dir: %w", err)
	}
	m.logs[tp] = l
	return l, nil
}

// Vanished returns, once, the recovery point the recovery-point
// checkpoint recorded for topic/partition when the checkpoint listed the
// log but its directory was missing at open (removed while the node was
// down): every offset below it had been written and flushed locally.
// ok is false for a log that was found, or that the checkpoint did not
// list, or when asked again.
func (m *Manager) Vanished(topic string, partition int32) (recoveryPoint int64, ok bool) {
	tp := checkpoint.TopicPartition{Topic: topic, Partition: partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	rp, ok := m.vanished[tp]
	delete(m.vanished, tp)
	return rp, ok
}

// Get returns the log of topic/partition if it is loaded.
func (m *Manager) Get(topic string, partition int32) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[checkpoint.TopicPartition{Topic: topic, Partition: partition}]
	return l, ok
}

// Logs returns every loaded log, ordered by topic and partition.
func (m *Manager) Logs() []*Log {
	m.mu.Lock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}

// Delete closes the log of topic/partition, renames its directory to
// <topic>-<partition>.<uuid>-delete (durably) and removes it in the
// background. Deleting a log that does not exist is a no-op.
func (m *Manager) Delete(topic string, partition int32) error {
	gone, err := m.setAside(topic, partition, DeleteDirSuffix)
	if err != nil || gone == "" {
		return err
	}
	m.removeInBackground(gone)
	return nil
}

// MarkStray closes the log of topic/partition and renames its directory
// to <topic>-<partition>.<uuid>-stray (durably), where it stays: a later
// OpenManager neither loads nor removes it. It returns the new path, ""
// for a log that does not exist.
func (m *Manager) MarkStray(topic string, partition int32) (string, error) {
	return m.setAside(topic, partition, StrayDirSuffix)
}

// setAside unloads a log and renames its directory to
// <topic>-<partition>.<uuid><suffix>, returning the new path.
func (m *Manager) setAside(topic string, partition int32, suffix string) (string, error) {
	tp := checkpoint.TopicPartition{Topic: topic, Partition: partition}
	m.mu.Lock()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	m.mu.Unlock()
	if !ok {
		return "", nil
	}
	m.cleaner.forget(tp)
	_ = l.Close()
	// Set aside in the log's own dir (JBOD): a rename never crosses
	// file systems.
	parent := filepath.Dir(l.dir)
	to := filepath.Join(parent, LogDirName(topic, partition)+"."+strings.ReplaceAll(uuid.NewString(), "-", "")+suffix)
	if err := m.opts.FS.Rename(l.dir, to); err != nil {
		return "", fmt.Errorf("storage: set aside %s: %w", l.dir, err)
	}
	if err := m.opts.FS.SyncDir(parent); err != nil {
		return "", fmt.Errorf("storage: set aside %s: %w", l.dir, err)
	}
	return to, nil
}

func (m *Manager) removeInBackground(path string) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.opts.FS.RemoveAll(path); err != nil {
			m.opts.Logger.Warn("storage: remove deleted log", "path", path, "err", err)
		}
	}()
}

// UpdateConfig sets the config of every log of topic (now and when later
// created or loaded).
func (m *Manager) UpdateConfig(topic string, cfg Config) {
	m.mu.Lock()
	m.configs[topic] = cfg
	var ls []*Log
	for tp, l := range m.logs {
		if tp.Topic == topic {
			ls = append(ls, l)
		}
	}
	m.mu.Unlock()
	for _, l := range ls {
		l.SetConfig(cfg)
	}
}

// Start runs the background loops: retention, flush (flush.ms),
// checkpoints and the log cleaner threads (unless DisableCleaner). Calling it twice is a no-op.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	m.loop(m.opts.RetentionCheckInterval, func() { m.RunRetention() })
	m.loop(m.opts.FlushCheckInterval, m.flushDue)
	m.loop(m.opts.CheckpointInterval, func() { _ = m.Checkpoint() })
	hwEvery := m.opts.HighWatermarkCheckpointInterval
	if hwEvery <= 0 {
		hwEvery = 5 * time.Second
	}
	m.loop(hwEvery, func() { _ = m.CheckpointHighWatermarks() })
	m.loop(m.opts.FreeCheckInterval, m.checkFree)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-m.stop:
				return
			case <-m.cpKick:
				_ = m.Checkpoint()
			}
		}
	}()
	if !m.opts.DisableCleaner {
		for range m.opts.CleanerThreads {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.cleaner.run(m.stop)
			}()
		}
	}
}

func (m *Manager) loop(every time.Duration, fn func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// RunRetention runs one retention pass over every log and returns how many
// segments it deleted.
func (m *Manager) RunRetention() int {
	now := m.opts.Now()
	n := 0
	for _, l := range m.Logs() {
		d, err := l.EnforceRetention(now)
		n += d
		if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrLogFailed) {
			m.opts.Logger.Warn("storage: retention", "dir", l.dir, "err", err)
		}
	}
	return n
}

func (m *Manager) flushDue() {
	now := m.opts.Now()
	for _, l := range m.Logs() {
		_ = l.maybeFlushByTime(now) // failures latch the log and reach Failed
	}
}

// Checkpoint writes the recovery-point and log-start-offset checkpoint
// files of every data directory (each lists the logs it holds).
func (m *Manager) Checkpoint() error { return m.eachHealthyDir(m.checkpointDir) }

// eachHealthyDir runs write (a checkpoint writer) on every data directory
// that has not failed, under cpMu, with the logs of the Manager, and
// joins the errors.
func (m *Manager) eachHealthyDir(write func(d *logDir, logs []*Log) error) error {
	m.cpMu.Lock()
	defer m.cpMu.Unlock()
	var errs []error
	logs := m.Logs()
	for _, d := range m.dirs {
		if d.failed.Load() {
			continue
		}
		if err := write(d, logs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckpointHighWatermarks writes the replication-offset-checkpoint of
// every data directory: each log's high watermark as the broker last set
// it ([Log.SetHighWatermark]). It runs every
// HighWatermarkCheckpointInterval, and with the other checkpoints
// ([Manager.Checkpoint], at close).
func (m *Manager) CheckpointHighWatermarks() error { return m.eachHealthyDir(m.checkpointHWDir) }

func (m *Manager) checkpointHWDir(d *logDir, logs []*Log) error {
	hws := map[checkpoint.TopicPartition]int64{}
	for _, l := range logs {
		if filepath.Dir(l.dir) == d.path {
			hws[checkpoint.TopicPartition{Topic: l.topic, Partition: l.partition}] = l.HighWatermark()
		}
	}
	if err := checkpoint.WriteOffsets(m.opts.FS, filepath.Join(d.path, ReplicationOffsetCheckpointFile), hws); err != nil {
		m.ioError(d, err)
		return fmt.Errorf("storage: write high watermarks: %w", err)
	}
	return nil
}

func (m *Manager) checkpointDir(d *logDir, logs []*Log) error {
	rps := map[checkpoint.TopicPartition]int64{}
	lsos := map[checkpoint.TopicPartition]int64{}
	for _, l := range logs {
		if filepath.Dir(l.dir) != d.path {
			continue
		}
		tp := checkpoint.TopicPartition{Topic: l.topic, Partition: l.partition}
		rps[tp] = l.RecoveryPoint()
		lsos[tp] = l.LogStartOffset()
	}
	if err := checkpoint.WriteOffsets(m.opts.FS, filepath.Join(d.path, RecoveryPointCheckpointFile), rps); err != nil {
		m.ioError(d, err)
		return fmt.Errorf("storage: write recovery points: %w", err)
	}
	if err := checkpoint.WriteOffsets(m.opts.FS, filepath.Join(d.path, LogStartOffsetCheckpointFile), lsos); err != nil {
		m.ioError(d, err)
		return fmt.Errorf("storage: write log start offsets: %w", err)
	}
	return m.checkpointHWDir(d, logs)
}

func (m *Manager) closeLogs() error {
	var errs []error
	for _, l := range m.Logs() {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops the loops, flushes and closes every log, writes the
// checkpoints and, in each directory where all of that succeeded and no
// log failed, the clean-shutdown marker; then releases the directories'
// locks. Idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.stop)
	m.mu.Unlock()
	m.wg.Wait()
	defer m.unlockDirs()

	logs := m.Logs()
	bad := map[string]error{}
	for _, l := range logs {
		err := l.Close()
		if err == nil && l.Failed() {
			err = fmt.Errorf("%w: %s", ErrLogFailed, l.dir)
		}
		if err != nil {
			p := filepath.Dir(l.dir)
			bad[p] = errors.Join(bad[p], err)
		}
	}
	var errs []error
	m.cpMu.Lock()
	defer m.cpMu.Unlock()
	for _, d := range m.dirs {
		err := bad[d.path]
		if err == nil && d.failed.Load() {
			err = fmt.Errorf("%w: data directory %s failed", ErrLogFailed, d.path)
		}
		if err == nil {
			err = m.checkpointDir(d, logs)
		}
		if err == nil {
			err = m.writeCleanMarker(d)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) writeCleanMarker(d *logDir) error {
	// Written like every data-directory file: a crash leaves the marker
	// fully durable or absent.
	if err := WriteCleanShutdown(m.opts.FS, d.path, m.brokerEpoch.Load()); err != nil {
		return fmt.Errorf("storage: write clean-shutdown marker: %w", err)
	}
	return nil
}

func (m *Manager) unlockDirs() {
	for _, d := range m.dirs {
		if d.lock != nil {
			_ = d.lock.Close()
			d.lock = nil
		}
	}
}
