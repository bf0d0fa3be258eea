package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// walFiles lists the Raft log files (.wal) in dir.
func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	return names
}

// With metadata.log.dir unset, the controller's Raft log lives in
// <first log dir>/__cluster_metadata-0, beside the partition logs (as in
// Kafka); storage does not take it for a partition, and a restart on the
// same directory finds the topics and their records.
func TestNodeMetadataLogDefaultsToTheLogDirAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	if n.cfg.MetadataLogDir != dir {
		t.Fatalf("metadata.log.dir = %q, want the log dir %q", n.cfg.MetadataLogDir, dir)
	}
	wal := filepath.Join(dir, "__cluster_metadata-0")
	if len(walFiles(t, wal)) == 0 {
		t.Fatalf("no Raft WAL in %s", wal)
	}
	if _, err := os.Stat(filepath.Join(dir, "metadata")); !os.IsNotExist(err) {
		t.Fatalf("old metadata subdirectory created: %v", err)
	}
	adm := newAdmin(t, n)
	createTopic(t, adm, "kept", 1, nil)
	cl := newClient(t, n)
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "kept", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, l := range n.store.Logs() {
		if strings.HasPrefix(l.Topic(), "__cluster_metadata") {
			t.Fatalf("storage opened %s-%d as a partition log", l.Topic(), l.Partition())
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2 := startNode(t, dir, nil)
	if len(n2.store.Logs()) != 1 {
		t.Fatalf("%d logs after restart, want 1", len(n2.store.Logs()))
	}
	got := consumeAll(t, n2, "kept", 1)
	if r := got[[2]int64{0, 0}]; r == nil || string(r.Value) != "v" {
		t.Fatalf("record after restart: %+v", got)
	}
	if len(walFiles(t, wal)) == 0 {
		t.Fatal("WAL gone after restart")
	}
}

// A data directory written while the default was <log dir>/metadata keeps
// using it: moving the default must not start such a node on empty
// metadata (which would set every log aside as stray).
func TestConfigMetadataLogDirKeepsALegacyWAL(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "metadata")
	if err := os.MkdirAll(filepath.Join(legacy, "__cluster_metadata-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if c := testConfig(t, dir, nil); c.MetadataLogDir != legacy {
		t.Fatalf("metadata.log.dir = %q, want the legacy %q", c.MetadataLogDir, legacy)
	}
	if c := testConfig(t, dir, map[string]string{"metadata.log.dir": dir}); c.MetadataLogDir != dir {
		t.Fatalf("explicit metadata.log.dir = %q", c.MetadataLogDir)
	}
	if c := testConfig(t, t.TempDir(), nil); c.MetadataLogDir != c.LogDir {
		t.Fatalf("fresh dir: metadata.log.dir = %q, log dir %q", c.MetadataLogDir, c.LogDir)
	}
}
