package tiering

// The uploader's decisions, as pure functions: which local segment to copy
// next, what remote retention deletes, what counts as an orphan, what Lead
// does to a log. No goroutine, no I/O, no clock: the input is one snapshot
// of a led partition (PlanInput) and the output a list of actions the
// uploader's shell (uploader.go) executes in order. The scripts under
// testdata/plan replay them (plan_test.go).
//
// The shell gathers a PlanInput at the start of a pass, runs Plan and
// executes its actions; after each copy it gathers again and asks PlanCopy
// for the next one, so one pass copies every segment that is due, oldest
// first, as segments seal meanwhile.

import (
	"cmp"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/tiering/objstore"
)

// PlanInput is one snapshot of a led partition: everything the planner
// decides from.
type PlanInput struct {
	Local  []storage.SegmentInfo        // local segments, oldest first (Log.Segments)
	Remote []metadata.RemoteSegmentInfo // remote segments in every state, by base offset
	// HighWatermark, LogStart (the whole log's), LocalStart (the first
	// local offset) and LogEnd (the next offset to be written).
	HighWatermark, LogStart, LocalStart, LogEnd int64
	Config                                      storage.Config // retention.ms, retention.bytes, cleanup.policy
	Now                                         time.Time
	// BrokerID is this broker's; OrphanGrace is how old this broker's
	// COPY_STARTED segment must be (EventTimestamp) to be an orphan when
	// this process is not copying it (Inflight).
	BrokerID    int32
	OrphanGrace time.Duration
	Inflight    map[uuid.UUID]bool
	// LastOrphanScan is when the partition's prefix was last listed for
	// unnamed objects (zero: never); one is due every ScanEvery.
	LastOrphanScan time.Time
	ScanEvery      time.Duration
}

// ActionKind says what an Action does.
type ActionKind int

const (
	// ActDeleteOrphans deletes Segments (COPY_STARTED orphans first, the
	// first Orphans of them, then interrupted DELETE_STARTED deletions to
	// resume) through the whole deletion path; the manifest's log start is
	// raised to LogStart.
	ActDeleteOrphans ActionKind = iota + 1
	// ActScanOrphanObjects lists the partition's prefix and deletes the
	// objects PlanOrphanObjects names.
	ActScanOrphanObjects
	// ActDeleteRedundant deletes COPY_FINISHED Segments another finished
	// segment covers wholly (left by a leader change); the manifest's log
	// start is left as it is.
	ActDeleteRedundant
	// ActRetain deletes Segments by remote retention (time, bytes, or
	// below the log start), oldest first: DELETE_STARTED on all, then the
	// log start moves to LogStart, then objects, manifest (its log start
	// raised to LogStart), DELETE_FINISHED.
	ActRetain
	// ActCopy copies the sealed local segment Segment under a new id,
	// with the producer snapshot at its end (storage finds it).
	ActCopy
)

var actionNames = map[ActionKind]string{
	ActDeleteOrphans: "delete-orphans", ActScanOrphanObjects: "scan-orphan-objects",
	ActDeleteRedundant: "delete-redundant", ActRetain: "retain", ActCopy: "copy",
}

func (k ActionKind) String() string { return actionNames[k] }

// Action is one step of a plan.
type Action struct {
	Kind     ActionKind
	Segments []metadata.RemoteSegmentInfo // the deletions' segments
	Orphans  int                          // ActDeleteOrphans: how many of Segments are orphans
	LogStart int64                        // ActDeleteOrphans, ActRetain: see the kinds
	// SkipIfPrevFailed: the shell skips this action when the one before
	// it failed (retention waits for the redundant segments to go).
	SkipIfPrevFailed bool
	Segment          storage.SegmentInfo // ActCopy
}

// Plan returns a pass's actions, in the order the shell runs them:
// orphans, the orphan-object scan when due, redundant segments, remote
// retention, then the next copy.
func Plan(in PlanInput) []Action {
	var out []Action
	if a, ok := planOrphans(in); ok {
		out = append(out, a)
	}
	if in.LastOrphanScan.IsZero() || in.Now.Sub(in.LastOrphanScan) >= in.ScanEvery {
		out = append(out, Action{Kind: ActScanOrphanObjects})
	}
	out = append(out, planRetention(in)...)
	if a, ok := PlanCopy(in); ok {
		out = append(out, a)
	}
	return out
}

// planOrphans: p's COPY_STARTED segments nobody is copying (not in flight
// in this process, and either committed by another broker id, a former
// leader, or older than OrphanGrace: this broker's, from before a crash or
// an abandoned copy), then its DELETE_STARTED segments (interrupted
// deletions, resumed from the top). An interrupted retention deletion
// already moved the log start at its DELETE_STARTED: the manifest catches
// up with it.
func planOrphans(in PlanInput) (Action, bool) {
	nowMs := in.Now.UnixMilli()
	grace := in.OrphanGrace.Milliseconds()
	var orphans, resumed []metadata.RemoteSegmentInfo
	for _, s := range in.Remote {
		switch {
		case s.State == metadata.DeleteStarted:
			resumed = append(resumed, s)
		case s.State == metadata.CopyStarted && !in.Inflight[s.SegmentID] &&
			(s.BrokerID != in.BrokerID || nowMs-s.EventTimestamp >= grace):
			orphans = append(orphans, s)
		}
	}
	if len(orphans)+len(resumed) == 0 {
		return Action{}, false
	}
	return Action{Kind: ActDeleteOrphans, Segments: append(orphans, resumed...), Orphans: len(orphans), LogStart: in.LogStart}, true
}

// planRetention: with cleanup.policy containing delete, first the
// COPY_FINISHED segments another finished segment covers wholly (the
// manifest already dropped them), then, oldest first by end offset, while
// the segment's MaxTimestamp is older than now minus retention.ms
// (retention.ms >= 0; a segment without timestamps is not judged by time),
// or the partition's size (remote bytes plus the local bytes above the
// remote end) minus the segment is still at least retention.bytes (>= 0),
// or the segment lies wholly below the log start (DeleteRecords, or local
// retention.ms having expired it).
func planRetention(in PlanInput) []Action {
	if !in.Config.Deletes() {
		return nil
	}
	var finished []metadata.RemoteSegmentInfo
	for _, s := range in.Remote {
		if s.State == metadata.CopyFinished {
			finished = append(finished, s)
		}
	}
	if len(finished) == 0 {
		return nil
	}
	var out []Action
	redundant, live := splitCovered(finished)
	if len(redundant) > 0 {
		out = append(out, Action{Kind: ActDeleteRedundant, Segments: redundant, LogStart: -1})
	}
	slices.SortFunc(live, func(a, b metadata.RemoteSegmentInfo) int { return cmp.Compare(a.EndOffset, b.EndOffset) })
	remoteEnd := live[len(live)-1].EndOffset
	var total int64
	for _, s := range live {
		total += s.SizeBytes
	}
	for _, s := range in.Local {
		if s.NextOffset-1 > remoteEnd {
			total += s.Size
		}
	}
	nowMs := in.Now.UnixMilli()
	cfg := in.Config
	var del []metadata.RemoteSegmentInfo
	for _, s := range live {
		byTime := cfg.RetentionMs >= 0 && s.MaxTimestamp >= 0 && s.MaxTimestamp < nowMs-cfg.RetentionMs
		bySize := cfg.RetentionBytes >= 0 && total-s.SizeBytes >= cfg.RetentionBytes
		belowStart := s.EndOffset < in.LogStart
		if !byTime && !bySize && !belowStart {
			break
		}
		total -= s.SizeBytes
		del = append(del, s)
	}
	if len(del) > 0 {
		out = append(out, Action{Kind: ActRetain, Segments: del, LogStart: del[len(del)-1].EndOffset + 1, SkipIfPrevFailed: len(redundant) > 0})
	}
	return out
}

// splitCovered splits finished segments into those another finished
// segment covers wholly (ties of the same range: the greater id stays) and
// the rest, each in input order. One sort and one walk: in the order
// (base rising, end falling, id falling) every segment that could cover s
// comes before it, so s is covered exactly when the greatest end seen
// before it reaches s's end.
func splitCovered(finished []metadata.RemoteSegmentInfo) (redundant, live []metadata.RemoteSegmentInfo) {
	order := make([]int, len(finished))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &finished[i], &finished[j]
		if c := cmp.Compare(a.BaseOffset, b.BaseOffset); c != 0 {
			return c
		}
		if c := cmp.Compare(b.EndOffset, a.EndOffset); c != 0 {
			return c
		}
		return compareIDs(b.SegmentID, a.SegmentID)
	})
	covered := make([]bool, len(finished))
	maxEnd, seen := int64(0), false
	for _, i := range order {
		s := &finished[i]
		// Ids are unique (the image keys segments by id), so an earlier
		// segment of the same range has the greater id.
		if seen && maxEnd >= s.EndOffset {
			covered[i] = true
		}
		if !seen || s.EndOffset > maxEnd {
			maxEnd, seen = s.EndOffset, true
		}
	}
	for i, s := range finished {
		if covered[i] {
			redundant = append(redundant, s)
		} else {
			live = append(live, s)
		}
	}
	return redundant, live
}

// PlanCopy returns the copy of the oldest local segment that should be
// remote and is not: sealed, non-empty, wholly below the high watermark
// and ending above the remote end (the last offset of the COPY_FINISHED
// segments) and the log start. A segment straddling the remote end (a new
// leader's segmentation) goes up whole with its true base: overlap of
// committed offsets is harmless, each holds the same batches on every
// replica.
func PlanCopy(in PlanInput) (Action, bool) {
	remoteEnd := int64(-1)
	if _, e, ok := finishedExtent(in.Remote); ok {
		remoteEnd = e
	}
	i := slices.IndexFunc(in.Local, func(s storage.SegmentInfo) bool {
		return dueForCopy(s, in.HighWatermark, remoteEnd, in.LogStart)
	})
	if i < 0 {
		return Action{}, false
	}
	return Action{Kind: ActCopy, Segment: in.Local[i]}, true
}

// dueForCopy is the one test of a local segment that should be remote and
// is not (see PlanCopy): sealed, non-empty, wholly below the high
// watermark hw, ending above remoteEnd (the last offset of the
// COPY_FINISHED segments, -1 if none) and the log start. The upload lag
// of a status counts the segments it holds for.
func dueForCopy(s storage.SegmentInfo, hw, remoteEnd, logStart int64) bool {
	return s.Sealed && s.NextOffset > s.BaseOffset && s.NextOffset <= hw &&
		s.NextOffset-1 > remoteEnd && s.NextOffset > logStart
}

// PlanOrphanObjects returns the keys of listed objects (a listing of the
// partition's prefix taken BEFORE remote was read) that are segment
// objects no remote segment names and no copy of this process holds, older
// than OrphanGrace (this broker's image may lag a record another broker
// just committed). An object is only ever put after its COPY_STARTED is
// committed, so a listed object of a live copy is named by remote.
func PlanOrphanObjects(in PlanInput, listed []objstore.ObjectInfo) []string {
	known := make(map[uuid.UUID]bool, len(in.Remote))
	for _, s := range in.Remote {
		known[s.SegmentID] = true
	}
	var out []string
	for _, o := range listed {
		info, err := ParseSegmentKey(o.Key)
		if err != nil || known[info.SegmentID] || in.Inflight[info.SegmentID] {
			continue // the manifest, or a named segment
		}
		if in.Now.Sub(o.LastModified) < in.OrphanGrace {
			continue
		}
		out = append(out, o.Key)
	}
	return out
}

// LeadPlan is what Lead does to a newly led partition's log, from its
// remote tier's extent (see uploader.go's file comment).
type LeadPlan struct {
	// Uploaded: Log.SetRemoteUploadedOffset(Uploaded) (0: no remote data,
	// nothing to do at all).
	Uploaded int64
	// Restart: the local log is empty and the remote tier ends above it:
	// Log.RestartAt(RemoteStart, Uploaded). Otherwise
	// Log.SetRemoteLogStart(RemoteStart).
	Restart     bool
	RemoteStart int64
}

// PlanLead decides what Lead does from the remote segments, the log end
// and the local start.
func PlanLead(in PlanInput) (LeadPlan, bool) {
	start, end, ok := finishedExtent(in.Remote)
	if !ok {
		return LeadPlan{}, false
	}
	return LeadPlan{
		Uploaded: end + 1, RemoteStart: start,
		Restart: in.LogEnd == in.LocalStart && end+1 > in.LogEnd,
	}, true
}
