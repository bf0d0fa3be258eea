package storage

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// The controller's Raft log lives in <metadata.log.dir>/__cluster_metadata-0,
// and metadata.log.dir defaults to the first log dir: the manager must leave
// that directory alone (not load, create, list or delete it as a partition),
// as Kafka's LogManager does.
func TestManagerSkipsClusterMetadataDirectory(t *testing.T) {
	fs := vfs.NewMem()
	// What the Raft WAL looks like on disk: not a segment layout at all.
	walDir := filepath.Join("/data", MetadataTopic+"-0")
	if err := fs.MkdirAll(walDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(filepath.Join(walDir, "00000000000000000001.wal"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("raft entries, not record batches")); err != nil {
		t.Fatal(err)
	}
	f.Close()

	m := openManager(t, managerOptions(fs))
	l, err := m.GetOrCreate("orders", 0, m.opts.Default)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(makeBatch(t, 3, 10, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(MetadataTopic, 0); ok {
		t.Fatal("__cluster_metadata-0 loaded as a partition log")
	}
	if _, err := m.GetOrCreate(MetadataTopic, 0, m.opts.Default); err == nil {
		t.Fatal("GetOrCreate of the metadata topic succeeded")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen, unclean too (no marker): still skipped, the WAL untouched,
	// and the real partition back.
	for _, clean := range []bool{true, false} {
		if !clean {
			fs.Remove(filepath.Join("/data", CleanShutdownFile))
		}
		m = openManager(t, managerOptions(fs))
		logs := m.Logs()
		if len(logs) != 1 || logs[0].Topic() != "orders" || logs[0].LogEndOffset() != 3 {
			t.Fatalf("clean=%v: logs after reopen: %d (want only orders-0 with 3 records)", clean, len(logs))
		}
		names, err := fs.List(walDir)
		if err != nil || len(names) != 1 || names[0] != "00000000000000000001.wal" {
			t.Fatalf("clean=%v: WAL dir now holds %v (%v)", clean, names, err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
