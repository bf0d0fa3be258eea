package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/storage/vfs"
)

// The data directory's small files keep their exact bytes across the
// refactor that moved their I/O into storage (issue 13): these goldens
// were written against the broker's own implementation and must pass
// unchanged against storage's.

// dataDirFile returns the contents of dir/name, after checking that no
// temporary file of an atomic write is left in dir.
func dataDirFile(t *testing.T, dir, name string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temporary file %s left in %s", e.Name(), dir)
		}
	}
	b, rerr := os.ReadFile(filepath.Join(dir, name))
	if err = errors.Join(err, rerr); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMetaPropertiesGoldenRoundTrip(t *testing.T) {
	inc := uuid.MustParse("0b9f3c2e-5d4a-4e1f-9a7b-2c3d4e5f6a7b")
	for _, tc := range []struct {
		name   string
		props  metaProperties
		golden string
	}{
		{"confirmed", metaProperties{clusterID: "MkU3OEVBNTcwNTJENDM2Qg", confirmed: true, incarnation: inc},
			"#\n#Written by strata\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=3\nincarnation.id=0b9f3c2e-5d4a-4e1f-9a7b-2c3d4e5f6a7b\ncluster.id.source=quorum\n"},
		{"self-made", metaProperties{clusterID: "own", incarnation: inc},
			"#\n#Written by strata\nversion=1\ncluster.id=own\nnode.id=3\nincarnation.id=0b9f3c2e-5d4a-4e1f-9a7b-2c3d4e5f6a7b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := writeMetaProperties(vfs.Default, dir, 3, tc.props); err != nil {
				t.Fatal(err)
			}
			if got := dataDirFile(t, dir, "meta.properties"); got != tc.golden {
				t.Fatalf("meta.properties:\n%q\nwant\n%q", got, tc.golden)
			}
			got, err := loadMetaProperties(vfs.Default, dir, 3)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.props {
				t.Fatalf("read back %+v, want %+v", got, tc.props)
			}
			if _, err := loadMetaProperties(vfs.Default, dir, 4); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("other node.id: %v, want ErrInvalidConfig", err)
			}
		})
	}

	t.Run("kafka-style", func(t *testing.T) {
		dir := t.TempDir()
		body := "# comment\n! another\n\nversion = 1\ncluster.id : abc\\\n  def\nnode.id=3\nincarnation.id=" + inc.String() + "\n"
		if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := loadMetaProperties(vfs.Default, dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		if want := (metaProperties{clusterID: "abcdef", incarnation: inc}); got != want {
			t.Fatalf("read %+v, want %+v", got, want)
		}
	})

	t.Run("missing", func(t *testing.T) {
		got, err := loadMetaProperties(vfs.Default, t.TempDir(), 3)
		if err != nil || got.clusterID != "" || got.confirmed || got.incarnation == (uuid.UUID{}) {
			t.Fatalf("first start: %+v, %v", got, err)
		}
	})

	for name, body := range map[string]string{
		"not key=value":   "version=1\nnovalue\n",
		"no cluster.id":   "node.id=3\nincarnation.id=" + inc.String() + "\n",
		"bad incarnation": "node.id=3\ncluster.id=x\nincarnation.id=nope\n",
		"continuation":    "node.id=3\\\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := loadMetaProperties(vfs.Default, dir, 3); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%q: %v, want ErrInvalidConfig", body, err)
			}
		})
	}
}

func TestPartitionMetadataGolden(t *testing.T) {
	dir := t.TempDir()
	id := uuid.MustParse("6e2a1d4c-8b3f-4a5e-9c7d-1f2e3d4c5b6a")
	if _, ok, err := readPartitionMetadata(vfs.Default, dir); ok || err != nil {
		t.Fatalf("missing file: ok=%v err=%v", ok, err)
	}
	if err := writePartitionMetadata(vfs.Default, dir, id); err != nil {
		t.Fatal(err)
	}
	const golden = "version: 0\ntopic_id: biodTIs_Sl6cfR8uPUxbag\n"
	if got := dataDirFile(t, dir, "partition.metadata"); got != golden {
		t.Fatalf("partition.metadata %q, want %q", got, golden)
	}
	got, ok, err := readPartitionMetadata(vfs.Default, dir)
	if err != nil || !ok || got != id {
		t.Fatalf("read back %v %v %v, want %v", got, ok, err, id)
	}
	// Kafka's own file (the same format) reads too, in any line order.
	kafka := "topic_id: biodTIs_Sl6cfR8uPUxbag\nversion: 0\n"
	if err := os.WriteFile(filepath.Join(dir, "partition.metadata"), []byte(kafka), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := readPartitionMetadata(vfs.Default, dir); err != nil || !ok || got != id {
		t.Fatalf("kafka's file: %v %v %v", got, ok, err)
	}
	for _, bad := range []string{"version: 0\n", "version: 0\ntopic_id: !!\n", "topic_id: AAAA\n"} {
		if err := os.WriteFile(filepath.Join(dir, "partition.metadata"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readPartitionMetadata(vfs.Default, dir); err == nil {
			t.Fatalf("%q read without error", bad)
		}
	}
}

func TestProducerIDBlockGoldenRestart(t *testing.T) {
	dir := t.TempDir()
	p, err := openProducerIDs(vfs.Default, dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := p.allocate(); err != nil || id != 5<<32 {
		t.Fatalf("first id %x, %v", id, err)
	}
	if got := dataDirFile(t, dir, "producer-id-block"); got != "next=1000\n" {
		t.Fatalf("producer-id-block %q", got)
	}
	// A restart starts at the reserved end and reserves the next block
	// before handing any id of it out.
	p, err = openProducerIDs(vfs.Default, dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := p.allocate(); err != nil || id != 5<<32|1000 {
		t.Fatalf("first id after restart %x, %v", id, err)
	}
	if got := dataDirFile(t, dir, "producer-id-block"); got != "next=2000\n" {
		t.Fatalf("producer-id-block after restart %q", got)
	}
	for _, bad := range []string{"2000\n", "next=x\n", "next=-1\n"} {
		if err := os.WriteFile(filepath.Join(dir, "producer-id-block"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := openProducerIDs(vfs.Default, dir, 5); err == nil {
			t.Fatalf("%q opened without error", bad)
		}
	}
}
