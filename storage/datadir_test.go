package storage

import (
	"errors"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/internal/props"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

func memDataDir(t *testing.T) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/data/t-0", 0o755); err != nil {
		t.Fatal(err)
	}
	return fs
}

// The data directory's small files go through the vfs they are given
// (never the os package) and round-trip.
func TestDataDirFilesRoundTrip(t *testing.T) {
	fs := memDataDir(t)
	if _, ok, err := ReadMetaProperties(fs, "/data"); ok || err != nil {
		t.Fatalf("missing meta.properties: %v %v", ok, err)
	}
	mp := MetaProperties{Version: "1", ClusterID: "c", NodeID: "2", IncarnationID: uuid.NewString(), ClusterIDSource: "quorum"}
	if err := WriteMetaProperties(fs, "/data", mp); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := ReadMetaProperties(fs, "/data"); !ok || err != nil || got != mp {
		t.Fatalf("meta.properties read back %+v %v %v, want %+v", got, ok, err, mp)
	}
	if err := WriteMetaProperties(fs, "/data", MetaProperties{NodeID: "2", ClusterID: "c", IncarnationID: mp.IncarnationID}); err != nil {
		t.Fatal(err)
	}
	if got, _ := vfs.ReadFile(fs, "/data/meta.properties", 1<<10); string(got) != "#\n#Written by strata\nversion=1\ncluster.id=c\nnode.id=2\nincarnation.id="+mp.IncarnationID+"\n" {
		t.Fatalf("meta.properties without a source: %q", got)
	}

	id := uuid.New()
	if _, ok, err := ReadPartitionMetadata(fs, "/data/t-0"); ok || err != nil {
		t.Fatalf("missing partition.metadata: %v %v", ok, err)
	}
	if err := WritePartitionMetadata(fs, "/data/t-0", id); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := ReadPartitionMetadata(fs, "/data/t-0"); !ok || err != nil || got != id {
		t.Fatalf("partition.metadata read back %v %v %v", got, ok, err)
	}

	if _, ok, err := ReadProducerIDBlock(fs, "/data"); ok || err != nil {
		t.Fatalf("missing producer-id-block: %v %v", ok, err)
	}
	if err := WriteProducerIDBlock(fs, "/data", 3000); err != nil {
		t.Fatal(err)
	}
	if n, ok, err := ReadProducerIDBlock(fs, "/data"); !ok || err != nil || n != 3000 {
		t.Fatalf("producer-id-block read back %d %v %v", n, ok, err)
	}

	f, _ := fs.Create("/data/meta.properties")
	_, _ = f.Write([]byte("garbage\n"))
	_ = f.Close()
	var se *props.SyntaxError
	if _, _, err := ReadMetaProperties(fs, "/data"); !errors.As(err, &se) {
		t.Fatalf("garbage meta.properties: %v, want a props.SyntaxError", err)
	}
}

// A failed write of any of them leaves the previous file and no
// temporary file: the producer-id block in particular must never go
// backwards, or a restart would hand out an id twice.
func TestDataDirFilesFailedWriteKeepsOld(t *testing.T) {
	for _, op := range []errfs.Op{errfs.OpCreate, errfs.OpWrite, errfs.OpSync, errfs.OpRename} {
		t.Run(op.String(), func(t *testing.T) {
			mem := memDataDir(t)
			if err := WriteProducerIDBlock(mem, "/data", 1000); err != nil {
				t.Fatal(err)
			}
			id := uuid.New()
			if err := WritePartitionMetadata(mem, "/data/t-0", id); err != nil {
				t.Fatal(err)
			}
			fs := errfs.Wrap(mem, errfs.On(op).Err(syscall.EIO))
			if err := WriteProducerIDBlock(fs, "/data", 2000); !errors.Is(err, syscall.EIO) {
				t.Fatalf("producer-id-block write: %v", err)
			}
			if err := WritePartitionMetadata(fs, "/data/t-0", uuid.New()); !errors.Is(err, syscall.EIO) {
				t.Fatalf("partition.metadata write: %v", err)
			}
			if n, _, err := ReadProducerIDBlock(mem, "/data"); err != nil || n != 1000 {
				t.Fatalf("producer-id-block after a failed write: %d %v", n, err)
			}
			if got, _, err := ReadPartitionMetadata(mem, "/data/t-0"); err != nil || got != id {
				t.Fatalf("partition.metadata after a failed write: %v %v", got, err)
			}
			for _, p := range []string{"/data/producer-id-block.tmp", "/data/t-0/partition.metadata.tmp"} {
				if _, err := mem.Stat(p); err == nil {
					t.Fatalf("%s left behind", p)
				}
			}
		})
	}
}

// TestCleanShutdownMarkerRecordsTheBrokerEpoch: Close writes Kafka's
// {"version":0,"broker_epoch":N} marker with the epoch SetBrokerEpoch
// gave (KIP-966); the next open reports it (CleanShutdownBrokerEpoch)
// and removes the marker, so a crash after that reports -1; a Close
// before the next registration keeps the epoch it found; an empty
// marker (older versions) is still a clean shutdown, without an epoch;
// a marker that does not parse counts as none.
func TestCleanShutdownMarkerRecordsTheBrokerEpoch(t *testing.T) {
	fs := vfs.NewMem()
	m, err := OpenManager(managerOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.CleanShutdownBrokerEpoch(); got != -1 {
		t.Fatalf("fresh directory: epoch %d, want -1", got)
	}
	m.SetBrokerEpoch(42)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := vfs.ReadFile(fs, "/data/"+CleanShutdownFile, 4096)
	if err != nil || string(b) != `{"version":0,"broker_epoch":42}` {
		t.Fatalf("marker %q, %v", b, err)
	}
	m, err = OpenManager(managerOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.CleanShutdownBrokerEpoch(); got != 42 {
		t.Fatalf("after a clean shutdown: epoch %d, want 42", got)
	}
	if _, ok, _ := ReadCleanShutdown(fs, "/data"); ok {
		t.Fatal("marker still there after open")
	}
	// Crash (no Close): no marker, -1.
	m2, err := OpenManager(managerOptions(fs.CrashClone(100, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.CleanShutdownBrokerEpoch(); got != -1 {
		t.Fatalf("after a crash: epoch %d, want -1", got)
	}
	m2.Close()
	// Closed again before this life registered (no SetBrokerEpoch): the
	// marker keeps the epoch it had, since nothing the controller needs
	// to know of changed.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if epoch, ok, err := ReadCleanShutdown(fs, "/data"); epoch != 42 || !ok || err != nil {
		t.Fatalf("marker after a close before registering: epoch %d ok %t err %v, want 42", epoch, ok, err)
	}
	for body, want := range map[string]int64{"": -1, `{"version":0,"broker_epoch":7}`: 7, "garbage": -1, `{"version":9,"broker_epoch":7}`: -1} {
		if err := vfs.WriteFileAtomic(fs, "/data/"+CleanShutdownFile, []byte(body)); err != nil {
			t.Fatal(err)
		}
		epoch, ok, err := ReadCleanShutdown(fs, "/data")
		wantOK := body == "" || want == 7
		if epoch != want || ok != wantOK || (err != nil) == wantOK {
			t.Errorf("marker %q: epoch %d ok %t err %v", body, epoch, ok, err)
		}
	}
}
