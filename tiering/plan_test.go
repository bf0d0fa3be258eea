package tiering

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/tiering/objstore"
)

// TestPlanScripts replays the planner's scripts under testdata/plan. A
// script builds one partition's snapshot and asks the planner what to do;
// `apply` then plays the uploader's part as if every step succeeded (or
// crashed at one), so a script follows a partition through several passes.
//
//	local                    input: one segment a line, oldest first:
//	                         <base>-<next> [size=<n>] [ts=<ms>] [active]
//	remote                   input: <name> <base>-<end> <state> [broker=<id>] [at=<ms>] [size=<n>] [ts=<ms>]
//	set [hw=] [log-start=] [local-start=] [log-end=] [now=<ms>] [retention-ms=] [retention-bytes=]
//	    [policy=<cleanup.policy>] [broker=<id>] [grace=<ms>] [last-scan=<ms>] [inflight=(<name>,...)]
//	plan                     Plan's actions
//	apply [crash-at=<kind>]  run the plan as the shell does; crash-at stops at that action's
//	                         first commit (DELETE_STARTED, or COPY_STARTED for a copy)
//	orphan-objects           input: <name> <ext> age=<ms> | manifest age=<ms>: PlanOrphanObjects
//	lead                     PlanLead
//	state                    the snapshot's remote segments and offsets
//
// Segment names stand for ids (a name's id is derived from it, so the
// order of ids is fixed). Times are unix ms; the clock starts at testTs,
// with an orphan-object scan just done. Regenerate with -rewrite.
func TestPlanScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/plan", func(t *testing.T, path string) {
		h := &planHarness{in: PlanInput{
			HighWatermark: 0, LogStart: 0, LocalStart: 0, LogEnd: 0,
			Config:      storage.Config{CleanupPolicy: "delete", RetentionMs: -1, RetentionBytes: -1},
			Now:         time.UnixMilli(testTs),
			BrokerID:    1,
			OrphanGrace: 2 * time.Minute,
			Inflight:    map[uuid.UUID]bool{},
			ScanEvery:   orphanScanEvery,
		}, names: map[uuid.UUID]string{}}
		h.in.LastOrphanScan = h.in.Now // no orphan-object scan due unless a script says so
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	})
}

type planHarness struct {
	in    PlanInput
	names map[uuid.UUID]string
}

func (h *planHarness) id(name string) uuid.UUID {
	id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(name))
	h.names[id] = name
	return id
}

func (h *planHarness) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "local":
		h.in.Local = nil
		for _, line := range lines(td.Input) {
			h.in.Local = append(h.in.Local, parseLocal(t, line))
		}
		return h.state()
	case "remote":
		h.in.Remote = nil
		for _, line := range lines(td.Input) {
			h.in.Remote = append(h.in.Remote, h.parseRemote(t, line))
		}
		h.sortRemote()
		return h.state()
	case "set":
		h.set(t, td)
		return h.state()
	case "state":
		return h.state()
	case "plan":
		return h.actions(Plan(h.in))
	case "apply":
		crashAt := ""
		if td.HasArg("crash-at") {
			td.ScanArgs(t, "crash-at", &crashAt)
		}
		return h.apply(crashAt)
	case "orphan-objects":
		var listed []objstore.ObjectInfo
		for _, line := range lines(td.Input) {
			f := strings.Fields(line)
			age := time.Duration(argInt(t, f, "age", 0)) * time.Millisecond
			key := ManifestKey("p", "orders", upTopicID, 0)
			if f[0] != "manifest" {
				key = SegmentKey("p", "orders", upTopicID, 0, 0, h.id(f[0]), f[1])
			}
			listed = append(listed, objstore.ObjectInfo{Key: key, LastModified: h.in.Now.Add(-age)})
		}
		var b strings.Builder
		for _, key := range PlanOrphanObjects(h.in, listed) {
			info, err := ParseSegmentKey(key)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "delete %s.%s\n", h.names[info.SegmentID], info.Ext)
		}
		if b.Len() == 0 {
			return "nothing\n"
		}
		return b.String()
	case "lead":
		lp, ok := PlanLead(h.in)
		switch {
		case !ok:
			return "no remote data\n"
		case lp.Restart:
			return fmt.Sprintf("uploaded=%d restart-at start=%d next=%d\n", lp.Uploaded, lp.RemoteStart, lp.Uploaded)
		}
		return fmt.Sprintf("uploaded=%d remote-log-start=%d\n", lp.Uploaded, lp.RemoteStart)
	}
	t.Fatalf("unknown command %q", td.Cmd)
	return ""
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// argInt returns the value of key=<n> among fields, or def.
func argInt(t *testing.T, fields []string, key string, def int64) int64 {
	for _, f := range fields {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			return n
		}
	}
	return def
}

func parseRange(t *testing.T, s string) (int64, int64) {
	a, b, ok := strings.Cut(s, "-")
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("bad range %q", s)
	}
	return x, y
}

func parseLocal(t *testing.T, line string) storage.SegmentInfo {
	f := strings.Fields(line)
	base, next := parseRange(t, f[0])
	s := storage.SegmentInfo{
		BaseOffset: base, NextOffset: next, Size: argInt(t, f, "size", 100), MaxTimestamp: argInt(t, f, "ts", -1),
		LogPath: fmt.Sprintf("%d.log", base), IndexPath: fmt.Sprintf("%d.index", base), TimeIndexPath: fmt.Sprintf("%d.timeindex", base),
		Sealed: !slices.Contains(f, "active"),
	}
	return s
}

var stateNames = map[string]metadata.RemoteSegmentState{
	"COPY_STARTED": metadata.CopyStarted, "COPY_FINISHED": metadata.CopyFinished,
	"DELETE_STARTED": metadata.DeleteStarted,
}

func (h *planHarness) parseRemote(t *testing.T, line string) metadata.RemoteSegmentInfo {
	f := strings.Fields(line)
	if len(f) < 3 {
		t.Fatalf("remote: %q", line)
	}
	base, end := parseRange(t, f[1])
	st, ok := stateNames[f[2]]
	if !ok {
		t.Fatalf("remote: state %q", f[2])
	}
	return metadata.RemoteSegmentInfo{
		SegmentID: h.id(f[0]), TopicID: upTopicID, BaseOffset: base, EndOffset: end,
		MaxTimestamp: argInt(t, f, "ts", -1), SizeBytes: argInt(t, f, "size", 100), State: st,
		BrokerID: int32(argInt(t, f, "broker", 1)), EventTimestamp: argInt(t, f, "at", h.in.Now.UnixMilli()),
	}
}

func (h *planHarness) sortRemote() {
	slices.SortStableFunc(h.in.Remote, func(a, b metadata.RemoteSegmentInfo) int { return cmpInt64(a.BaseOffset, b.BaseOffset) })
}

func (h *planHarness) set(t *testing.T, td *datadriven.TestData) {
	for _, a := range td.CmdArgs {
		if a.Key == "inflight" {
			h.in.Inflight = map[uuid.UUID]bool{}
			for _, v := range a.Vals {
				h.in.Inflight[h.id(v)] = true
			}
			continue
		}
		if a.Key == "policy" {
			h.in.Config.CleanupPolicy = a.Vals[0]
			continue
		}
		n, err := strconv.ParseInt(a.Vals[0], 10, 64)
		if err != nil {
			t.Fatalf("set %s: %v", a.Key, err)
		}
		switch a.Key {
		case "hw":
			h.in.HighWatermark = n
		case "log-start":
			h.in.LogStart = n
		case "local-start":
			h.in.LocalStart = n
		case "log-end":
			h.in.LogEnd = n
		case "now":
			h.in.Now = time.UnixMilli(n)
		case "retention-ms":
			h.in.Config.RetentionMs = n
		case "retention-bytes":
			h.in.Config.RetentionBytes = n
		case "broker":
			h.in.BrokerID = int32(n)
		case "grace":
			h.in.OrphanGrace = time.Duration(n) * time.Millisecond
		case "last-scan":
			h.in.LastOrphanScan = time.UnixMilli(n)
		default:
			t.Fatalf("set: unknown %q", a.Key)
		}
	}
}

func (h *planHarness) segNames(segs []metadata.RemoteSegmentInfo) string {
	names := make([]string, len(segs))
	for i, s := range segs {
		names[i] = h.names[s.SegmentID]
	}
	return "[" + strings.Join(names, " ") + "]"
}

func (h *planHarness) action(a Action) string {
	switch a.Kind {
	case ActDeleteOrphans:
		return fmt.Sprintf("delete-orphans %s orphans=%d manifest-log-start=%d", h.segNames(a.Segments), a.Orphans, a.LogStart)
	case ActScanOrphanObjects:
		return "scan-orphan-objects"
	case ActDeleteRedundant:
		return "delete-redundant " + h.segNames(a.Segments)
	case ActRetain:
		s := fmt.Sprintf("retain %s log-start=%d", h.segNames(a.Segments), a.LogStart)
		if a.SkipIfPrevFailed {
			s += " (skipped if the previous action failed)"
		}
		return s
	case ActCopy:
		return fmt.Sprintf("copy %d-%d", a.Segment.BaseOffset, a.Segment.NextOffset-1)
	}
	return "?"
}

func (h *planHarness) actions(acts []Action) string {
	if len(acts) == 0 {
		return "nothing\n"
	}
	var b strings.Builder
	for _, a := range acts {
		b.WriteString(h.action(a))
		b.WriteByte('\n')
	}
	return b.String()
}

func (h *planHarness) state() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log-start=%d local-start=%d hw=%d log-end=%d\n", h.in.LogStart, h.in.LocalStart, h.in.HighWatermark, h.in.LogEnd)
	for _, s := range h.in.Local {
		kind := "sealed"
		if !s.Sealed {
			kind = "active"
		}
		fmt.Fprintf(&b, "local %d-%d %s size=%d\n", s.BaseOffset, s.NextOffset, kind, s.Size)
	}
	for _, s := range h.in.Remote {
		fmt.Fprintf(&b, "remote %s %d-%d %s broker=%d size=%d\n", h.names[s.SegmentID], s.BaseOffset, s.EndOffset, s.State, s.BrokerID, s.SizeBytes)
	}
	return b.String()
}

// setState moves segs to st (DeleteFinished: out of the image), as the
// controller's commits would.
func (h *planHarness) setState(segs []metadata.RemoteSegmentInfo, st metadata.RemoteSegmentState) {
	for _, s := range segs {
		i := slices.IndexFunc(h.in.Remote, func(r metadata.RemoteSegmentInfo) bool { return r.SegmentID == s.SegmentID })
		if i < 0 {
			continue
		}
		if st == metadata.DeleteFinished {
			h.in.Remote = slices.Delete(h.in.Remote, i, i+1)
			continue
		}
		h.in.Remote[i].State = st
		h.in.Remote[i].BrokerID = h.in.BrokerID
		h.in.Remote[i].EventTimestamp = h.in.Now.UnixMilli()
	}
}

// apply plays the uploader's shell over Plan's actions, every step
// succeeding, up to a crash at the first commit of the action crashAt.
func (h *planHarness) apply(crashAt string) string {
	var b strings.Builder
	for _, a := range Plan(h.in) {
		crash := a.Kind.String() == crashAt
		b.WriteString(h.action(a))
		switch a.Kind {
		case ActDeleteOrphans, ActDeleteRedundant:
			h.setState(a.Segments, metadata.DeleteStarted)
			if !crash {
				h.setState(a.Segments, metadata.DeleteFinished)
			}
		case ActRetain:
			h.setState(a.Segments, metadata.DeleteStarted)
			h.in.LogStart = max(h.in.LogStart, a.LogStart)
			h.in.Local = slices.DeleteFunc(h.in.Local, func(s storage.SegmentInfo) bool { return s.Sealed && s.NextOffset <= h.in.LogStart })
			if len(h.in.Local) > 0 {
				h.in.LocalStart = max(h.in.LocalStart, h.in.Local[0].BaseOffset)
			}
			if !crash {
				h.setState(a.Segments, metadata.DeleteFinished)
			}
		case ActScanOrphanObjects:
			h.in.LastOrphanScan = h.in.Now
		case ActCopy:
			for {
				name := fmt.Sprintf("c%d", a.Segment.BaseOffset)
				seg := metadata.RemoteSegmentInfo{
					SegmentID: h.id(name), TopicID: upTopicID, BaseOffset: a.Segment.BaseOffset, EndOffset: a.Segment.NextOffset - 1,
					MaxTimestamp: a.Segment.MaxTimestamp, SizeBytes: a.Segment.Size, State: metadata.CopyStarted,
					BrokerID: h.in.BrokerID, EventTimestamp: h.in.Now.UnixMilli(),
				}
				h.in.Remote = append(h.in.Remote, seg)
				h.sortRemote()
				if crash {
					b.WriteString(" as " + name)
					break
				}
				h.setState([]metadata.RemoteSegmentInfo{seg}, metadata.CopyFinished)
				b.WriteString(" as " + name)
				next, ok := PlanCopy(h.in)
				if !ok {
					break
				}
				a = next
				b.WriteString("\n" + h.action(a))
			}
		}
		if crash {
			b.WriteString(" (crash)\n")
			break
		}
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		b.WriteString("nothing\n")
	}
	b.WriteString("---\n")
	b.WriteString(h.state())
	return b.String()
}

// coveredQuadratic is remote retention's coverage walk as it was: every
// pair compared. splitCovered must agree with it.
func coveredQuadratic(finished []metadata.RemoteSegmentInfo) (redundant, live []metadata.RemoteSegmentInfo) {
	for i, s := range finished {
		covered := false
		for j, o := range finished {
			if i != j && o.BaseOffset <= s.BaseOffset && o.EndOffset >= s.EndOffset &&
				(o.BaseOffset != s.BaseOffset || o.EndOffset != s.EndOffset || compareIDs(o.SegmentID, s.SegmentID) > 0) {
				covered = true
				break
			}
		}
		if covered {
			redundant = append(redundant, s)
		} else {
			live = append(live, s)
		}
	}
	return redundant, live
}

// The linear coverage walk decides as the quadratic one did, on random
// overlapping segments (same bases, same ranges, nested, straddling).
func TestSplitCoveredMatchesPairwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := rng.IntN(12)
		segs := make([]metadata.RemoteSegmentInfo, n)
		for i := range segs {
			base := int64(rng.IntN(20))
			segs[i] = metadata.RemoteSegmentInfo{SegmentID: uuid.New(), BaseOffset: base, EndOffset: base + int64(rng.IntN(6))}
		}
		slices.SortStableFunc(segs, func(a, b metadata.RemoteSegmentInfo) int { return cmpInt64(a.BaseOffset, b.BaseOffset) })
		r1, l1 := splitCovered(segs)
		r2, l2 := coveredQuadratic(segs)
		if !slices.EqualFunc(r1, r2, sameSeg) || !slices.EqualFunc(l1, l2, sameSeg) {
			t.Fatalf("segments %v:\nlinear    redundant %v live %v\npairwise  redundant %v live %v", segs, r1, l1, r2, l2)
		}
	}
}

func sameSeg(a, b metadata.RemoteSegmentInfo) bool { return a.SegmentID == b.SegmentID }
