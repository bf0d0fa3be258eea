package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/google/uuid"

	strprops "github.com/strata-io/strata/internal/props"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// metaProperties is what <log dir>/meta.properties says about this node.
type metaProperties struct {
	clusterID string
	// confirmed: clusterID is the quorum's, as a registration confirmed
	// it (cluster.id.source=quorum). Files written before cluster ids were
	// a metadata record carry an id the node generated on its own.
	confirmed   bool
	incarnation uuid.UUID
}

// loadMetaProperties reads <dir>/meta.properties (cluster.id, node.id,
// Strata's incarnation.id and cluster.id.source) through storage, which
// owns the file. A node.id that differs from the file's is refused, as
// Kafka refuses it. Without the file (a first start) it returns a fresh
// incarnation and no cluster id: the file is written once the quorum's id
// is known (adoptClusterID).
func loadMetaProperties(fs vfs.FS, dir string, nodeID int32) (metaProperties, error) {
	path := filepath.Join(dir, storage.MetaPropertiesFile)
	props, ok, err := storage.ReadMetaProperties(fs, dir)
	if se := (*strprops.SyntaxError)(nil); errors.As(err, &se) {
		return metaProperties{}, fmt.Errorf("broker: %s: %w: %s", path, ErrInvalidConfig, se.Msg)
	}
	if err != nil {
		return metaProperties{}, err
	}
	if !ok {
		return metaProperties{incarnation: uuid.New()}, nil
	}
	if id := props.NodeID; id != strconv.Itoa(int(nodeID)) {
		return metaProperties{}, fmt.Errorf("%w: node.id=%d but %s says %s", ErrInvalidConfig, nodeID, path, id)
	}
	inc, err := uuid.Parse(props.IncarnationID)
	if props.ClusterID == "" || err != nil {
		return metaProperties{}, fmt.Errorf("%w: %s lacks cluster.id or incarnation.id", ErrInvalidConfig, path)
	}
	return metaProperties{clusterID: props.ClusterID, confirmed: props.ClusterIDSource == "quorum", incarnation: inc}, nil
}

// writeMetaProperties writes <dir>/meta.properties durably (storage:
// tmp, fsync, rename, directory fsync).
func writeMetaProperties(fs vfs.FS, dir string, nodeID int32, p metaProperties) error {
	mp := storage.MetaProperties{ClusterID: p.clusterID, NodeID: strconv.Itoa(int(nodeID)), IncarnationID: p.incarnation.String()}
	if p.confirmed {
		mp.ClusterIDSource = "quorum"
	}
	return storage.WriteMetaProperties(fs, dir, mp)
}
