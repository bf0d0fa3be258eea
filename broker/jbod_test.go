package broker

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/storage/vfs"
)

// TestJBODUsesEveryLogDir: with two log.dirs, partitions are placed on
// both (the one holding fewest first), DescribeLogDirs reports each with
// its own partitions, and a restart finds every partition in its dir.
func TestJBODUsesEveryLogDir(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	extra := map[string]string{"log.dirs": a + "," + b}
	n := startNode(t, a, extra)
	adm := newAdmin(t, n)
	createTopic(t, adm, "jbod", 4, nil)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(4) {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "jbod", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	describe := func(n *Node) map[string]map[int32]bool {
		t.Helper()
		c := dialRaw(t, n)
		req := kmsg.NewPtrDescribeLogDirsRequest()
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = "jbod", []int32{0, 1, 2, 3}
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
		out := map[string]map[int32]bool{}
		for _, d := range resp.Dirs {
			if d.ErrorCode != 0 {
				t.Fatalf("dir %s: code %d", d.Dir, d.ErrorCode)
			}
			out[d.Dir] = map[int32]bool{}
			for _, tp := range d.Topics {
				for _, p := range tp.Partitions {
					out[d.Dir][p.Partition] = true
				}
			}
		}
		return out
	}
	absA, _ := filepath.Abs(a)
	absB, _ := filepath.Abs(b)
	before := describe(n)
	if len(before) != 2 || len(before[absA]) != 2 || len(before[absB]) != 2 {
		t.Fatalf("partitions by dir %v, want 2 in each of %s and %s", before, absA, absB)
	}
	for p := range int32(4) {
		if before[absA][p] == before[absB][p] {
			t.Fatalf("partition %d in both or neither dir: %v", p, before)
		}
	}
	n.Close()

	n = startNode(t, a, extra)
	after := describe(n)
	for _, d := range []string{absA, absB} {
		for p := range before[d] {
			if !after[d][p] {
				t.Fatalf("after restart partitions by dir %v, before %v", after, before)
			}
		}
	}
	for p := range int32(4) {
		if leo := n.partition("jbod", p).log.LogEndOffset(); leo != 1 {
			t.Fatalf("partition %d: log end %d after restart, want 1", p, leo)
		}
	}
}

// TestMetadataLogDirIsLocked: metadata.log.dir outside log.dirs is locked
// too, so a second node on other log dirs but the same metadata dir is
// refused before it opens the Raft log.
func TestMetadataLogDirIsLocked(t *testing.T) {
	meta := t.TempDir()
	startNode(t, t.TempDir(), map[string]string{"metadata.log.dir": meta})
	n2, err := Open(Options{Config: testConfig(t, t.TempDir(), map[string]string{"metadata.log.dir": meta}),
		Logger: testLogger(), StartTimeout: testWait})
	if err == nil {
		n2.Close()
	}
	if !errors.Is(err, vfs.ErrLocked) || !strings.Contains(err.Error(), meta) {
		t.Fatalf("second node on the same metadata.log.dir: %v, want ErrLocked naming %s", err, meta)
	}
}
