package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	if n.cfg.RemoteStore.Backend == tiering.BackendFS {
		n.loops.Add(1)
		go func() { defer n.loops.Done(); n.sweepFSStore() }()
	}
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

// fsSweepEvery is how often the fs backend's directory is swept of the
// temporary files of Puts a crash cut short.
const fsSweepEvery = 10 * time.Minute

// sweepFSStore removes the fs backend's temporary files older than twice
// the request timeout, first once that long after start (every Put of an
// earlier process has ended by then), then every fsSweepEvery: a Put
// attempt never lives longer than one timeout, so an older one was cut
// short by a crash (kill -9 during an upload) and would otherwise stay
// forever.
func (n *Node) sweepFSStore() {
	fs, err := objstore.NewFSStore(n.cfg.RemoteStore.FSPath)
	if err != nil {
		return
	}
	age := 2 * n.cfg.RemoteStore.RequestTimeout
	t := time.NewTimer(age)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if k, err := fs.Sweep(age); err != nil {
			n.logger.Warn("broker: sweep the fs object store", "err", err)
		} else if k > 0 {
			n.logger.Info("broker: removed temporary files of interrupted uploads", "files", k)
		}
		t.Reset(fsSweepEvery)
	}
}
