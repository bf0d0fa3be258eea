package storage

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/strata-io/strata/internal/props"
	"github.com/strata-io/strata/storage/vfs"
)

// The small files of a data directory that are not a log's data:
// storage owns their formats and their I/O, through vfs, and replaces
// every one of them with [vfs.WriteFileAtomic] (tmp, fsync, rename,
// directory fsync). What they mean is the caller's: the broker decides
// which node id and cluster id are acceptable, which topic id a log must
// have, how producer ids are handed out.

// MetaProperties is <data dir>/meta.properties, Kafka's format (a Java
// properties file) with Strata's keys: the values as the file spells
// them, "" when missing.
type MetaProperties struct {
	Version         string // version
	ClusterID       string // cluster.id
	NodeID          string // node.id
	IncarnationID   string // incarnation.id: Strata's, new at each first start of the directory
	ClusterIDSource string // cluster.id.source: "quorum" once a registration confirmed cluster.id
}

// MetaPropertiesVersion is the version [WriteMetaProperties] writes.
const MetaPropertiesVersion = 1

// ReadMetaProperties reads dir's meta.properties; ok is false when the
// file is missing. A file that is not a properties file gives an error
// wrapping a [*props.SyntaxError].
func ReadMetaProperties(fs vfs.FS, dir string) (p MetaProperties, ok bool, err error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	f, err := fs.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return MetaProperties{}, false, nil
	}
	if err != nil {
		return MetaProperties{}, false, fmt.Errorf("storage: read %s: %w", path, err)
	}
	defer f.Close()
	m, err := props.Parse(f)
	if err != nil {
		return MetaProperties{}, false, fmt.Errorf("storage: %s: %w", path, err)
	}
	return MetaProperties{
		Version: m["version"], ClusterID: m["cluster.id"], NodeID: m["node.id"],
		IncarnationID: m["incarnation.id"], ClusterIDSource: m["cluster.id.source"],
	}, true, nil
}

// WriteMetaProperties replaces dir's meta.properties with p (version
// [MetaPropertiesVersion] whatever p.Version says; cluster.id.source
// only when set).
func WriteMetaProperties(fs vfs.FS, dir string, p MetaProperties) error {
	data := fmt.Sprintf("#\n#Written by strata\nversion=%d\ncluster.id=%s\nnode.id=%s\nincarnation.id=%s\n",
		MetaPropertiesVersion, p.ClusterID, p.NodeID, p.IncarnationID)
	if p.ClusterIDSource != "" {
		data += "cluster.id.source=" + p.ClusterIDSource + "\n"
	}
	return writeDataDirFile(fs, filepath.Join(dir, MetaPropertiesFile), []byte(data))
}

// partition.metadata, as Kafka writes it:
//
//	version: 0
//	topic_id: <topic id, URL-safe base64 without padding>
const partitionMetadataVersion = 0

// EncodeTopicID spells a topic id as partition.metadata (and Kafka's
// tools) do.
func EncodeTopicID(id uuid.UUID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ReadPartitionMetadata returns the topic id a log directory was created
// for; ok is false when the file is missing.
func ReadPartitionMetadata(fs vfs.FS, dir string) (id uuid.UUID, ok bool, err error) {
	path := filepath.Join(dir, PartitionMetadataFile)
	b, err := vfs.ReadFile(fs, path, maxSmallFile)
	if errors.Is(err, iofs.ErrNotExist) {
		return uuid.UUID{}, false, nil
	}
	if err != nil {
		return uuid.UUID{}, false, fmt.Errorf("storage: read partition.metadata: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "topic_id" {
			raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil || len(raw) != 16 {
				return uuid.UUID{}, false, fmt.Errorf("storage: partition.metadata in %s: bad topic id %q", dir, v)
			}
			return uuid.UUID(raw), true, nil
		}
	}
	return uuid.UUID{}, false, fmt.Errorf("storage: partition.metadata in %s has no topic_id", dir)
}

// WritePartitionMetadata replaces dir's partition.metadata with topic id
// id.
func WritePartitionMetadata(fs vfs.FS, dir string, id uuid.UUID) error {
	data := fmt.Sprintf("version: %d\ntopic_id: %s\n", partitionMetadataVersion, EncodeTopicID(id))
	return writeDataDirFile(fs, filepath.Join(dir, PartitionMetadataFile), []byte(data))
}

// The producer-id block file holds the end of the last block of producer
// ids a node reserved:
//
//	next=<counter>\n

// ReadProducerIDBlock returns the reserved end dir's producer-id-block
// holds; ok is false when the file is missing.
func ReadProducerIDBlock(fs vfs.FS, dir string) (next int64, ok bool, err error) {
	path := filepath.Join(dir, ProducerIDBlockFile)
	b, err := vfs.ReadFile(fs, path, maxSmallFile)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("storage: read %s: %w", path, err)
	}
	v, found := strings.CutPrefix(strings.TrimSpace(string(b)), "next=")
	n, perr := strconv.ParseInt(v, 10, 64)
	if !found || perr != nil || n < 0 {
		return 0, false, fmt.Errorf("storage: %s: bad content %q", path, b)
	}
	return n, true, nil
}

// WriteProducerIDBlock replaces dir's producer-id-block with next. Once it
// returns nil the new end is durable.
func WriteProducerIDBlock(fs vfs.FS, dir string, next int64) error {
	return writeDataDirFile(fs, filepath.Join(dir, ProducerIDBlockFile), []byte(fmt.Sprintf("next=%d\n", next)))
}

// maxSmallFile bounds what a read of these files accepts: they are tens
// of bytes.
const maxSmallFile = 1 << 20

func writeDataDirFile(fs vfs.FS, path string, data []byte) error {
	if err := vfs.WriteFileAtomic(fs, path, data); err != nil {
		return fmt.Errorf("storage: write %s: %w", path, err)
	}
	return nil
}

// .kafka_cleanshutdown, as Kafka 3.7+ writes it (KIP-966):
//
//	{"version":0,"broker_epoch":<the broker epoch of the incarnation that shut down>}
//
// An empty marker (Strata before this format, or Kafka before 3.7) still
// means a clean shutdown, with no broker epoch (-1).
const cleanShutdownVersion = 0

// cleanShutdownJSON is the marker's body.
type cleanShutdownJSON struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"broker_epoch"`
}

// WriteCleanShutdown writes dir's clean-shutdown marker recording
// brokerEpoch (-1 when the node never registered), atomically.
func WriteCleanShutdown(fs vfs.FS, dir string, brokerEpoch int64) error {
	b, _ := json.Marshal(cleanShutdownJSON{Version: cleanShutdownVersion, BrokerEpoch: brokerEpoch})
	return writeDataDirFile(fs, filepath.Join(dir, CleanShutdownFile), b)
}

// ReadCleanShutdown reads dir's clean-shutdown marker: ok is false when
// there is none (the last shutdown was not clean); brokerEpoch is -1 for
// an empty (older) marker. A marker that does not parse, or of an unknown
// version, is an error; the caller treats it as no marker.
func ReadCleanShutdown(fs vfs.FS, dir string) (brokerEpoch int64, ok bool, err error) {
	path := filepath.Join(dir, CleanShutdownFile)
	f, err := fs.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, fmt.Errorf("storage: read %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return -1, false, fmt.Errorf("storage: read %s: %w", path, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return -1, true, nil
	}
	var m cleanShutdownJSON
	if err := json.Unmarshal(b, &m); err != nil || m.Version != cleanShutdownVersion {
		return -1, false, fmt.Errorf("storage: %s: not a version %d clean-shutdown marker: %q", path, cleanShutdownVersion, b)
	}
	return m.BrokerEpoch, true, nil
}
