package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/tiering"
	"github.com/strata-io/strata/tiering/objstore"
)

// openRemoteStore opens the remote tier's object store when
// remote.log.storage.system.enable is true: after storage (the fs
// backend's default directory lives under the log dir) and before the
// listeners, so a missing bucket or refused credentials stop the node at
// start with one line instead of failing every upload later. An endpoint
// that does not answer is an outage: the node starts and warns. Its
// strata_objstore_* metrics go to the node's registry.
func (n *Node) openRemoteStore(ctx context.Context) error {
	if !n.cfg.RemoteStorageEnable {
		return nil
	}
	store, err := tiering.OpenStore(ctx, n.cfg.RemoteStore, n.reg)
	if errors.Is(err, tiering.ErrStoreUnreachable) && store != nil {
		// An outage, not a mistake: serve local data, uploads retry.
		n.logger.Warn("broker: remote storage unreachable at start; serving local data, uploads and remote reads retry", "err", err)
	} else if err != nil {
		return fmt.Errorf("broker: remote storage: %w", err)
	}
	n.remote = store
	where := n.cfg.RemoteStore.FSPath
	if n.cfg.RemoteStore.Backend == tiering.BackendS3 {
		where = n.cfg.RemoteStore.S3.Bucket
	}
	n.logger.Info("broker: remote storage opened", "backend", n.cfg.RemoteStore.Backend, "location", where)
	return nil
}

// RemoteStore returns the remote tier's object store (retrying, timed and
// metered as tiering.OpenStore builds it), or nil when
// remote.log.storage.system.enable is false. It is safe for concurrent
// use and lives as long as the node.
func (n *Node) RemoteStore() objstore.ObjectStore { return n.remote }
