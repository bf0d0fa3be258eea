package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering"
)

// TestKill9TieredKeepsEveryRecordAndLeavesNoOrphans kills the strata binary
// with SIGKILL while it uploads segments of a tiered topic (small segments,
// small local retention, fast upload loop), three times. After each
// restart every acknowledged record is read back from offset 0 — most of
// it from the remote tier — and at the end the bucket holds exactly the
// objects of the segments the node reports as remote: uploads cut by a
// kill left orphans, and they were cleaned, never a hole.
func TestKill9TieredKeepsEveryRecordAndLeavesNoOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	data := t.TempDir()
	objects := filepath.Join(t.TempDir(), "objects")
	settings := []string{
		"remote.storage.fs.path=" + objects,
		"remote.log.manager.task.interval.ms=100",
		"log.retention.check.interval.ms=100",
		"log.segment.delete.delay.ms=0",
		"remote.log.manager.orphan.grace.ms=1000",
	}
	start := func(round int) *proc { return startProcOn(t, data, round, "127.0.0.1:0", settings...) }
	const topic, partitions = "kill9tier", 2
	p := start(0)
	createProcTopic(t, p.addr, topic, partitions, map[string]*string{
		"segment.bytes":         kmsg.StringPtr("16384"), // many segments: kills land mid-upload
		"remote.storage.enable": kmsg.StringPtr("true"),
		"local.retention.bytes": kmsg.StringPtr("32768"),
		"retention.ms":          kmsg.StringPtr("-1"),
	})
	all := map[[2]int64]string{}
	for round := 1; round <= 3; round++ {
		acks := produceUntilKilled(t, p, topic, fmt.Sprintf("tier%d", round), 3000*round)
		for _, a := range acks {
			all[[2]int64{int64(a.partition), a.offset}] = a.value
		}
		p = start(round)
		checkLog(t, p.addr, topic, partitions, all)
	}
	// Everything sealed goes up; orphans of the kills are deleted after
	// the grace; then every object in the bucket belongs to a segment the
	// node counts, len(tiering.PackedSegmentExts) objects each.
	admin := adminAddr(t, p)
	if err := testutil.Within(procWait, func() error {
		segs, lag := tierTotals(t, admin, topic)
		objs := countObjects(t, objects, topic)
		if lag == 0 && segs > 0 && objs == len(tiering.PackedSegmentExts)*segs {
			t.Logf("%d remote segments, %d objects, no orphans", segs, objs)
			return nil
		}
		return fmt.Errorf("bucket holds %d objects of %s for %d remote segments (upload lag %d segments)", objs, topic, segs, lag)
	}); err != nil {
		t.Fatal(err)
	}
}

// adminAddr reads the ADMIN address from the process's address line.
func adminAddr(t *testing.T, p *proc) string {
	b, _ := os.ReadFile(p.out)
	line, _, _ := strings.Cut(string(b), "\n")
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "ADMIN="); ok {
			return v
		}
	}
	t.Fatalf("no ADMIN address in %q", line)
	return ""
}

// tierTotals sums `strata tier status` of topic: remote segments and
// segments waiting for upload.
func tierTotals(t *testing.T, admin, topic string) (segs, lag int) {
	var out, errb strings.Builder
	if code := run([]string{"tier", "status", "--admin", admin, "--topic", topic, "--format", "json"}, &out, &errb); code != 0 {
		t.Fatalf("tier status: %d %s", code, errb.String())
	}
	rows, err := decodeStatus(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		segs += r.RemoteSegments
		lag += r.UploadLagSegments
	}
	return segs, lag
}

// countObjects counts the segment objects of topic in the fs bucket (not
// manifests), read straight from the directory.
func countObjects(t *testing.T, root, topic string) int {
	n := 0
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(filepath.ToSlash(path), "/"+topic+"-") && !strings.HasSuffix(path, "manifest.json") && !strings.Contains(filepath.ToSlash(path), "/manifest.d/") && !strings.Contains(d.Name(), ".tmp") {
			n++
		}
		return nil
	})
	return n
}
