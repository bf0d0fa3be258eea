package tiering

// The uploader: the write side of the remote tier. One per node; the
// broker feeds it the partitions it leads (Lead/Resign) and it
//
//   - copies their sealed, committed segments to the object store
//     (uploader_copy.go),
//   - applies remote retention and deletes orphans (uploader_delete.go),
//   - deletes the remote data of deleted topics when this broker is the
//     janitor (uploader_delete.go).
//
// Goroutines: one per led partition (its passes run in order, so one copy
// at most is in flight per partition and segments go up in offset order),
// one janitor loop, all owned by the Uploader and stopped by Resign/Close.
// Copies share a node-wide pool of Threads slots
// (remote.log.manager.copier.thread.pool.size) and a token bucket on the
// bytes read from local files (remote.log.manager.copy.max.bytes.per.second).
// Nothing here runs on a produce or fetch path: a failing object store only
// delays uploads (and so local deletion), never an append or a read.
//
// # What Lead expects and does
//
// The broker calls Lead once it leads a partition with
// remote.storage.enable=true and its log is open, BEFORE serving produce
// and fetch on it; Lead reads only the local metadata image and the log
// (no object store call), so it returns at once. It
//
//  1. computes remoteEnd, the last offset of the partition's COPY_FINISHED
//     segments, and calls Log.SetRemoteUploadedOffset(remoteEnd+1), so
//     local retention may delete what is already remote;
//  2. if the local log is empty (LogEndOffset == LocalLogStartOffset: the
//     disk was lost, or the partition is being restored) and the remote
//     tier ends above it, calls Log.RestartAt(remoteStart, remoteEnd+1):
//     the partition serves [remoteStart, remoteEnd] from the remote tier
//     and appends after it (the HW the broker then computes starts at
//     remoteEnd+1);
//  3. otherwise, when remote data exists, calls
//     Log.SetRemoteLogStart(remoteStart) so the log start covers the
//     remote tier (refused, and ignored, when the local start is lower).
//
// Resign (leadership lost, topic deleted, partition closed) stops the
// partition's goroutine; an in-flight copy is cancelled and its
// COPY_STARTED segment becomes an orphan the next leader deletes.
//
// # The .epochs object
//
// A segment's leader-epoch entries, in the text format of Kafka's
// leader-epoch-checkpoint file (storage/checkpoint), restricted to the
// segment: the entry in force at the base offset (its start clamped to the
// base), then every entry starting inside the segment:
//
//	0            format version
//	2            number of entries
//	4 1000       <epoch> <start offset>, one line each, start offsets rising
//	5 1500
//
// The same entries are in the controller's record and the manifest; the
// object lets a reader or a restore rebuild a leader-epoch cache from the
// bucket alone.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/tiering/objstore"
)

// Uploader defaults for UploaderConfig's zero fields.
const (
	DefaultUploaderThreads  = 2
	DefaultUploaderInterval = 5 * time.Second
	DefaultOrphanGrace      = 2 * time.Minute
	// orphanScanEvery is how often a led partition's prefix is listed for
	// objects no metadata segment names.
	orphanScanEvery = 10 * time.Minute
	// DefaultRetryBackoff and DefaultRetryBackoffMax are the first and
	// the longest pause between retries of one step when
	// UploaderConfig leaves them 0 (Kafka's remote.storage.retry.backoff
	// defaults are the broker's; these are for tests and tools).
	DefaultRetryBackoff    = 200 * time.Millisecond
	DefaultRetryBackoffMax = 5 * time.Second
)

// UploaderConfig configures [NewUploader].
type UploaderConfig struct {
	// Store is the object store, already timed and retried per request by
	// the broker (OpenStore); the uploader's own retries, with backoff
	// from RetryBackoff up to RetryBackoffMax, ride out longer outages,
	// and a probe of the store wakes them all when it is back
	// (uploader_health.go).
	Store objstore.ObjectStore
	// RetryBackoff is the first pause between retries of a step
	// (remote.storage.retry.backoff.ms); it doubles, with jitter, up to
	// RetryBackoffMax (remote.storage.retry.backoff.max.ms). 0 means
	// DefaultRetryBackoff, DefaultRetryBackoffMax.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration

	Prefix string
	Meta   Metadata
	// BrokerID is recorded in every segment record this node commits.
	BrokerID int32
	// Threads bounds concurrent segment copies node-wide
	// (remote.log.manager.copier.thread.pool.size); 0 means 2.
	Threads int
	// Interval is how often each led partition is examined
	// (remote.log.manager.task.interval.ms); 0 means 5s. Kick examines at
	// once.
	Interval time.Duration
	// CopyMaxBytesPerSecond caps the bytes read from local segment files
	// for upload, node-wide (remote.log.manager.copy.max.bytes.per.second);
	// 0 means unlimited.
	CopyMaxBytesPerSecond int64
	// OrphanGrace: a COPY_STARTED segment this process is not copying,
	// committed by this broker id, is an orphan once its EventTimestamp is
	// older than this; one committed by another broker id is an orphan at
	// once. 0 means 2m.
	OrphanGrace time.Duration
	Registerer  prometheus.Registerer // may be nil
	Logger      *slog.Logger          // nil: discard
	Now         func() time.Time      // nil: time.Now
}

// Uploader copies led partitions' sealed segments to the object store and
// applies remote retention; see the file comment. Safe for concurrent use.
type Uploader struct {
	cfg     UploaderConfig
	ms      *ManifestStore
	log     *slog.Logger
	metrics *uploaderMetrics
	slots   chan struct{} // copier pool: one token per concurrent copy
	bucket  *tokenBucket  // nil: unlimited

	// backoffBase is the first retry pause, backoffMax the longest
	// (tests shorten them).
	backoffBase, backoffMax time.Duration
	health                  storeHealth

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the Uploader started

	mu    sync.Mutex // guards parts, retired, inflight, started, closed, unknown
	parts map[Partition]*partTask
	// retired holds the done channels of cancelled tasks, so a new task
	// of the same partition waits for the old one to stop: two copies of
	// one partition never overlap in time.
	retired  map[Partition]chan struct{}
	inflight map[uuid.UUID]bool // segment ids this process is copying
	started  bool
	closed   bool
	unknown  map[uuid.UUID]bool // deleted topics whose name is unknown, logged once

	janitorKick chan struct{}

	// passes counts completed partition passes, janitorPasses completed
	// janitor passes (Passes, and tests waiting for "a pass ran").
	passes, janitorPasses atomic.Uint64

	// gaugeMu serialises setting and dropping a topic's gauges, so a pass
	// finishing after its topic's last Resign cannot bring them back.
	gaugeMu sync.Mutex
}

// partTask is one led partition's goroutine and what it last saw.
type partTask struct {
	lp     LeaderPartition
	epoch  int32
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{} // buffered 1
	done   chan struct{}
	prev   chan struct{} // the previous task's done, nil if none

	lastOrphanScan time.Time // partition goroutine only
	// fenced: the controller refused a commit of this task's epoch
	// (errFenced); the task's goroutine ends. Written by the partition
	// goroutine only, read by others only after done is closed.
	fenced bool

	// passesStarted and passesDone count this task's passes; a pass that
	// began after passesStarted read n has finished once passesDone > n.
	passesStarted, passesDone atomic.Uint64

	mu     sync.Mutex // guards status
	status PartitionStatus
}

// NewUploader checks cfg and builds an Uploader; Start starts it.
func NewUploader(cfg UploaderConfig) (*Uploader, error) {
	if cfg.Store == nil || cfg.Meta == nil {
		return nil, errors.New("tiering: uploader needs a Store and Meta")
	}
	if cfg.Threads < 0 || cfg.Interval < 0 || cfg.CopyMaxBytesPerSecond < 0 || cfg.OrphanGrace < 0 || cfg.RetryBackoff < 0 || cfg.RetryBackoffMax < 0 {
		return nil, fmt.Errorf("tiering: uploader: negative setting (threads %d, interval %v, copy max bytes/s %d, orphan grace %v)",
			cfg.Threads, cfg.Interval, cfg.CopyMaxBytesPerSecond, cfg.OrphanGrace)
	}
	if cfg.Threads == 0 {
		cfg.Threads = DefaultUploaderThreads
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultUploaderInterval
	}
	if cfg.OrphanGrace == 0 {
		cfg.OrphanGrace = DefaultOrphanGrace
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = max(DefaultRetryBackoffMax, cfg.RetryBackoff)
	}
	if cfg.RetryBackoffMax < cfg.RetryBackoff {
		return nil, fmt.Errorf("tiering: uploader: retry backoff %v above its max %v", cfg.RetryBackoff, cfg.RetryBackoffMax)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newUploaderMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("tiering: uploader metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &Uploader{
		cfg:         cfg,
		ms:          NewManifestStore(cfg.Store),
		log:         cfg.Logger.With("component", "tiering-uploader"),
		metrics:     m,
		slots:       make(chan struct{}, cfg.Threads),
		backoffBase: cfg.RetryBackoff,
		backoffMax:  cfg.RetryBackoffMax,
		ctx:         ctx,
		cancel:      cancel,
		parts:       map[Partition]*partTask{},
		retired:     map[Partition]chan struct{}{},
		inflight:    map[uuid.UUID]bool{},
		unknown:     map[uuid.UUID]bool{},
		janitorKick: make(chan struct{}, 1),
	}
	u.ms.Now = cfg.Now
	if cfg.CopyMaxBytesPerSecond > 0 {
		u.bucket = newTokenBucket(cfg.CopyMaxBytesPerSecond, time.Now)
	}
	return u, nil
}

// Start starts the janitor loop and the goroutines of partitions led
// before Start. Calling it twice is a no-op.
func (u *Uploader) Start() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.started || u.closed {
		return
	}
	u.started = true
	u.wg.Add(2)
	go u.janitorLoop()
	go u.gaugeLoop()
	for _, t := range u.parts {
		u.startTaskLocked(t)
	}
}

// Close stops every loop and waits for them: in-flight copies are
// cancelled through their contexts (every object-store call honours its
// context), so Close returns promptly even while the store hangs. Further
// Lead calls are ignored. Idempotent.
func (u *Uploader) Close() error {
	u.mu.Lock()
	u.closed = true
	for p, t := range u.parts {
		t.cancel()
		delete(u.parts, p)
	}
	u.mu.Unlock()
	u.cancel()
	u.wg.Wait()
	return nil
}

// Lead tells the uploader this broker leads p (see the file comment for
// what it expects and does at once). Calling it again with the same log
// and leader epoch is a no-op; a new leader epoch or log replaces the
// partition's task.
func (u *Uploader) Lead(p LeaderPartition) {
	epoch := p.LeaderEpoch()
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return
	}
	if old, ok := u.parts[p.Partition]; ok {
		if old.epoch == epoch && old.lp.Log == p.Log {
			u.mu.Unlock()
			return
		}
		u.retireLocked(p.Partition, old)
	}
	u.mu.Unlock()

	u.onLead(p)

	ctx, cancel := context.WithCancel(u.ctx)
	t := &partTask{lp: p, epoch: epoch, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), done: make(chan struct{})}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		cancel()
		return
	}
	if prev, ok := u.parts[p.Partition]; ok { // a racing Lead got here first
		u.retireLocked(p.Partition, prev)
	}
	t.prev = u.retired[p.Partition]
	delete(u.retired, p.Partition)
	u.parts[p.Partition] = t
	if u.started {
		u.startTaskLocked(t)
	}
}

// onLead applies the remote tier's extent to the log (steps 1–3 of the
// file comment, decided by PlanLead). Only local calls: the metadata
// image and the log.
func (u *Uploader) onLead(p LeaderPartition) {
	l := p.Log
	lead, ok := PlanLead(PlanInput{
		Remote: u.cfg.Meta.RemoteSegments(p.TopicID, p.Index),
		LogEnd: l.LogEndOffset(), LocalStart: l.LocalLogStartOffset(),
	})
	if !ok {
		return
	}
	l.SetRemoteUploadedOffset(lead.Uploaded)
	if lead.Restart {
		if err := l.RestartAt(lead.RemoteStart, lead.Uploaded); err != nil {
			u.log.Error("restart empty log after the remote tier", "partition", p.Partition, "remote_start", lead.RemoteStart, "next", lead.Uploaded, "err", err)
		} else {
			u.log.Info("empty local log restarted after the remote tier", "partition", p.Partition, "remote_start", lead.RemoteStart, "next", lead.Uploaded)
		}
		return
	}
	if err := l.SetRemoteLogStart(lead.RemoteStart); err != nil && !errors.Is(err, storage.ErrOffsetOutOfRange) {
		u.log.Warn("set remote log start", "partition", p.Partition, "remote_start", lead.RemoteStart, "err", err)
	}
}

// Resign stops the uploader's work on p (leadership lost or topic
// deleted). It does not wait for an in-flight copy to stop: Close does.
func (u *Uploader) Resign(p Partition) {
	u.mu.Lock()
	t, ok := u.parts[p]
	if ok {
		u.retireLocked(p, t)
	}
	u.mu.Unlock()
	if !ok {
		return
	}
	u.gaugeMu.Lock()
	defer u.gaugeMu.Unlock()
	if !u.leadsTopic(p.Topic) {
		u.metrics.dropTopic(p.Topic)
	}
}

// leadsTopic reports whether any partition of topic is led.
func (u *Uploader) leadsTopic(topic string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for q := range u.parts {
		if q.Topic == topic {
			return true
		}
	}
	return false
}

// Kick makes every led partition, and the janitor, run a pass now.
func (u *Uploader) Kick() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range u.parts {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
	select {
	case u.janitorKick <- struct{}{}:
	default:
	}
}

// Fenced reports whether p's task has stopped because the controller
// refused a commit made under its leader epoch (this broker no longer
// leads p in that epoch) and no Lead with a newer epoch has replaced it.
func (u *Uploader) Fenced(p Partition) bool {
	u.mu.Lock()
	t := u.parts[p]
	u.mu.Unlock()
	if t == nil {
		return false
	}
	select {
	case <-t.done:
		return t.fenced
	default:
		return false
	}
}

// Passes returns how many partition passes have completed since
// NewUploader, over every partition led so far. It only grows.
func (u *Uploader) Passes() uint64 { return u.passes.Load() }

// Status returns a led partition's status, computed now from the log and
// the metadata image.
func (u *Uploader) Status(p Partition) (PartitionStatus, bool) {
	u.mu.Lock()
	t, ok := u.parts[p]
	u.mu.Unlock()
	if !ok {
		return PartitionStatus{}, false
	}
	return u.statusOf(t.lp), true
}

// Statuses returns every led partition's status, by topic then partition.
func (u *Uploader) Statuses() []PartitionStatus {
	u.mu.Lock()
	lps := make([]LeaderPartition, 0, len(u.parts))
	for _, t := range u.parts {
		lps = append(lps, t.lp)
	}
	u.mu.Unlock()
	out := make([]PartitionStatus, 0, len(lps))
	for _, lp := range lps {
		out = append(out, u.statusOf(lp))
	}
	slices.SortFunc(out, func(a, b PartitionStatus) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Index) - int(b.Index)
	})
	return out
}

func (u *Uploader) statusOf(lp LeaderPartition) PartitionStatus {
	segs := u.cfg.Meta.RemoteSegments(lp.TopicID, lp.Index)
	st := PartitionStatus{Partition: lp.Partition, RemoteStart: -1, RemoteEnd: -1}
	remoteEnd := int64(-1)
	if s, e, ok := finishedExtent(segs); ok {
		st.RemoteStart, st.RemoteEnd, remoteEnd = s, e, e
	}
	for _, s := range segs {
		if s.State == metadata.CopyFinished {
			st.RemoteBytes += s.SizeBytes
			st.RemoteSegments++
		}
	}
	l := lp.Log
	st.LogStart, st.LocalStart, st.LogEnd = l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset()
	hw := lp.HighWatermark()
	// The log start is read before the segments: storage drops every
	// segment wholly below its log start as it moves it, so the log start
	// test of dueForCopy excludes nothing here that is still listed.
	for _, s := range l.Segments() {
		st.LocalBytes += s.Size
		if dueForCopy(s, hw, remoteEnd, st.LogStart) {
			st.UploadLagBytes += s.Size
			st.UploadLagSegments++
		}
	}
	return st
}

// finishedExtent returns the first and last offsets of the COPY_FINISHED
// segments (segs sorted by base offset), and false if there are none.
func finishedExtent(segs []metadata.RemoteSegmentInfo) (start, end int64, ok bool) {
	start, end = -1, -1
	for _, s := range segs {
		if s.State != metadata.CopyFinished {
			continue
		}
		if !ok || s.BaseOffset < start {
			start = s.BaseOffset
		}
		end = max(end, s.EndOffset)
		ok = true
	}
	return start, end, ok
}

// retireLocked cancels t and keeps its done channel for p's next task.
// A task never started (Start not yet called) is done at once.
func (u *Uploader) retireLocked(p Partition, t *partTask) {
	t.cancel()
	delete(u.parts, p)
	if !u.started {
		close(t.done)
	}
	u.retired[p] = t.done
}

func (u *Uploader) startTaskLocked(t *partTask) {
	u.wg.Add(1)
	go u.partitionLoop(t)
}

// partitionLoop runs a pass at once, then every Interval or Kick, until
// the task is cancelled (Resign, a new Lead, Close).
func (u *Uploader) partitionLoop(t *partTask) {
	defer u.wg.Done()
	defer close(t.done)
	if t.prev != nil {
		select {
		case <-t.prev:
		case <-t.ctx.Done():
			return
		}
	}
	tick := time.NewTicker(u.cfg.Interval)
	defer tick.Stop()
	for {
		u.pass(t)
		if t.fenced {
			t.cancel() // stays in parts: a Lead in the same epoch is a no-op
			return
		}
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		case <-t.kick:
		}
	}
}

// gather takes the planner's snapshot of a led partition: the metadata
// image, the log and the clock, no object-store call.
func (u *Uploader) gather(t *partTask) PlanInput {
	lp := t.lp
	l := lp.Log
	return PlanInput{
		Remote:         u.cfg.Meta.RemoteSegments(lp.TopicID, lp.Index),
		HighWatermark:  lp.HighWatermark(),
		LogStart:       l.LogStartOffset(),
		LocalStart:     l.LocalLogStartOffset(),
		LogEnd:         l.LogEndOffset(),
		Local:          l.Segments(),
		Config:         l.Config(),
		Now:            u.cfg.Now(),
		BrokerID:       u.cfg.BrokerID,
		OrphanGrace:    u.cfg.OrphanGrace,
		Inflight:       u.inflightIDs(),
		ScanEvery:      orphanScanEvery,
		LastOrphanScan: t.lastOrphanScan,
	}
}

// pass is one examination of a led partition: it gathers a snapshot, runs
// Plan (orphans, the orphan-object scan when due, remote retention, the
// next copy) and executes the actions in order; after each copy it asks
// PlanCopy for the next, until nothing is left to copy; then the metrics.
func (u *Uploader) pass(t *partTask) {
	ctx := t.ctx
	if ctx.Err() != nil {
		return
	}
	t.passesStarted.Add(1)
	defer func() { t.passesDone.Add(1); u.passes.Add(1) }()
	in := u.gather(t)
	failed := false
	for _, a := range Plan(in) {
		if ctx.Err() != nil {
			break
		}
		if a.SkipIfPrevFailed && failed {
			continue
		}
		var err error
		switch a.Kind {
		case ActDeleteOrphans:
			err = u.deleteOrphans(ctx, t.lp, a, t.epoch)
		case ActScanOrphanObjects:
			if err = u.scanOrphanObjects(ctx, t); err == nil {
				t.lastOrphanScan = in.Now
			}
		case ActDeleteRedundant:
			err = u.deleteRedundant(ctx, t.lp, a, t.epoch)
		case ActRetain:
			err = u.retain(ctx, t.lp, a, t.epoch)
		case ActCopy:
			for ctx.Err() == nil {
				copied, cerr := u.copyNext(ctx, t.lp, a, t.epoch)
				if cerr != nil || !copied {
					if errors.Is(cerr, errFenced) {
						err = cerr
					}
					break
				}
				next, ok := PlanCopy(u.gather(t))
				if !ok {
					break
				}
				a = next
			}
		}
		if errors.Is(err, errFenced) {
			// The controller says another broker, or a newer epoch of
			// this one, leads the partition: every later action would
			// be refused the same way. The task stops (partitionLoop)
			// until the broker hears of the change (Resign, or Lead
			// with the new epoch).
			t.fenced = true
			u.log.Warn("remote tier writes fenced: this broker no longer leads the partition in its epoch; uploads stop",
				"topic", t.lp.Topic, "partition", t.lp.Index, "leader_epoch", t.epoch, "err", err)
			break
		}
		failed = err != nil
	}
	u.publishTopic(t.lp.Topic)
}

// gaugeLoop publishes every led topic's gauges each Interval, apart from
// the passes: a pass stuck retrying against a store that is down must not
// freeze the upload-lag gauges that show the backlog growing.
func (u *Uploader) gaugeLoop() {
	defer u.wg.Done()
	tick := time.NewTicker(u.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-tick.C:
		}
		u.mu.Lock()
		topics := map[string]bool{}
		for p := range u.parts {
			topics[p.Topic] = true
		}
		u.mu.Unlock()
		for topic := range topics {
			u.publishTopic(topic)
		}
		u.checkDrained()
	}
}

// publishTopic sets a topic's gauges from its led partitions.
func (u *Uploader) publishTopic(topic string) {
	u.mu.Lock()
	var lps []LeaderPartition
	for p, t := range u.parts {
		if p.Topic == topic {
			lps = append(lps, t.lp)
		}
	}
	u.mu.Unlock()
	if len(lps) == 0 {
		return
	}
	sts := make([]PartitionStatus, len(lps))
	for i, lp := range lps {
		sts[i] = u.statusOf(lp)
	}
	u.gaugeMu.Lock()
	defer u.gaugeMu.Unlock()
	if u.leadsTopic(topic) {
		u.metrics.setTopic(topic, sts)
	}
}

// permanent reports whether err will not go away by retrying the same
// step: a refused state transition, a bad request, a corrupt manifest, a
// bad key. Anything else (an unavailable store or controller, a timeout,
// manifest contention) is retried with backoff.
func permanent(err error) bool {
	switch {
	case errors.Is(err, metadata.ErrIllegalSegmentTransition),
		errors.Is(err, objstore.ErrInvalidKey),
		errors.Is(err, objstore.ErrInvalidRange),
		errors.Is(err, ErrCorruptManifest),
		errors.Is(err, ErrInvalidManifest),
		errors.Is(err, errSegmentVanished),
		errors.Is(err, errAckMismatch),
		errors.Is(err, errSuperseded),
		errors.Is(err, errFenced):
		return true
	}
	// The controller answers with Kafka error codes: a non-retriable one
	// (INVALID_REQUEST, UNKNOWN_TOPIC_ID, ...) will be answered again.
	var ke *kerr.Error
	return errors.As(err, &ke) && !ke.Retriable
}

// retry runs fn until it succeeds, fails permanently, or ctx ends,
// pausing with exponential backoff and full jitter (from backoffBase,
// capped at backoffMax) between attempts; a recovery of the object store
// (uploader_health.go) ends every pause at once. Each failed attempt
// counts as an upload error. While the store is known down the outage is
// logged once node-wide, not per step.
func (u *Uploader) retry(ctx context.Context, what string, fn func() error) error {
	delay := u.backoffBase
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		u.metrics.errors.Inc()
		if permanent(err) {
			return err
		}
		wake := u.suspect()
		if attempt%10 == 9 && !u.storeDown() {
			u.log.Warn("tiering step failed; retrying", "step", what, "attempt", attempt+1, "err", err)
		} else {
			u.log.Debug("tiering step failed; retrying", "step", what, "attempt", attempt+1, "err", err)
		}
		d := delay/2 + rand.N(delay/2+1)
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-wake:
			timer.Stop()
			delay = u.backoffBase // the store is back: start over
			continue
		case <-timer.C:
		}
		delay = min(2*delay, u.backoffMax)
	}
}

// commit records a segment state change as the partition's leader in
// epoch (metadata.UnknownLeaderEpoch: not as a leader, the janitor),
// retrying transient failures. The controller fences the writer
// (metadata.State.PlanRemoteSegment): FENCED_LEADER_EPOCH or
// NOT_LEADER_OR_FOLLOWER come back as errFenced, never retried.
func (u *Uploader) commit(ctx context.Context, seg metadata.RemoteSegmentInfo, state metadata.RemoteSegmentState, epoch int32) error {
	rec := metadata.RemoteSegmentRecord{
		SegmentID: seg.SegmentID, TopicID: seg.TopicID, Partition: seg.Partition,
		BaseOffset: seg.BaseOffset, EndOffset: seg.EndOffset, MaxTimestamp: seg.MaxTimestamp,
		LeaderEpochs: seg.LeaderEpochs, SizeBytes: seg.SizeBytes,
		State: state, BrokerID: u.cfg.BrokerID, EventTimestamp: u.cfg.Now().UnixMilli(),
		WriterLeaderEpoch: epoch,
	}
	return u.retry(ctx, "commit "+state.String(), func() error {
		err := u.cfg.Meta.CommitRemoteSegment(ctx, rec)
		if errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.NotLeaderForPartition) {
			return fmt.Errorf("%w: %s of segment %s in leader epoch %d: %w", errFenced, state, seg.SegmentID, epoch, err)
		}
		return err
	})
}

// inflightIDs returns the ids of the segments this process is copying.
func (u *Uploader) inflightIDs() map[uuid.UUID]bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.inflight)
}

func (u *Uploader) setInflight(id uuid.UUID, on bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if on {
		u.inflight[id] = true
	} else {
		delete(u.inflight, id)
	}
}
