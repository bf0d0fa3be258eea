package controller

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/controller/metadata"
)

// Delta is one step of the metadata log as [Watcher.Next] delivers it:
// either a full image (when the watcher asked for offsets the log no longer
// holds) or the records of one entry.
//
// To follow the log, a broker replaces its view by Image when it is set and
// otherwise applies Records with metadata.State.ApplyBatch(Offset, Records),
// ignoring the records it refuses (the controller refused them too). After
// a restart it watches again from its last applied offset + 1.
type Delta struct {
	// Offset is the entry's offset (its Raft index), or the image's offset.
	Offset int64
	// Records are the records of the entry; nil when Image is set.
	Records []metadata.Record
	// Image, when set, is the whole metadata state as of Offset.
	Image *metadata.State
}

// Watcher is a stream of metadata deltas. Next blocks until a delta is
// available, ctx is done, or the stream ends (the controller stopped or the
// connection broke: watch again from the last offset + 1). Not safe for
// concurrent use; Close releases it and is idempotent.
type Watcher interface {
	Next(ctx context.Context) (Delta, error)
	Close() error
}

// Watch returns the applied metadata log from fromOffset on: every record
// with offset >= fromOffset, in order, first as an image if fromOffset lies
// below what the log still holds. Any controller serves it from its own
// applied log, the leader or not.
func (c *Controller) Watch(ctx context.Context, fromOffset int64) (Watcher, error) {
	select {
	case <-c.stopc:
		return nil, ErrStopped
	default:
	}
	return &localWatcher{c: c, next: max(fromOffset, 0)}, nil
}

// localWatcher reads applied entries straight from the Raft storage.
type localWatcher struct {
	c       *Controller
	next    int64 // the smallest offset not yet delivered
	pending []Delta
	closed  bool
}

const watchBatchBytes = 1 << 20

func (w *localWatcher) Next(ctx context.Context) (Delta, error) {
	for {
		if w.closed {
			return Delta{}, ErrStopped
		}
		if len(w.pending) > 0 {
			d := w.pending[0]
			w.pending = w.pending[1:]
			return d, nil
		}
		n := w.c.node
		appliedc := n.appliedChan()
		applied := n.applied.Load()
		idx := uint64(max(w.next, 1))
		if idx > applied {
			select {
			case <-appliedc:
				continue
			case <-ctx.Done():
				return Delta{}, ctx.Err()
			case <-n.donec:
				return Delta{}, ErrStopped
			}
		}
		first, err := w.c.storage.FirstIndex()
		if err != nil {
			return Delta{}, err
		}
		if idx < first {
			if err := w.image(); err != nil {
				return Delta{}, err
			}
			continue
		}
		ents, err := w.c.storage.Entries(idx, applied+1, watchBatchBytes)
		if errors.Is(err, raft.ErrCompacted) {
			continue // compacted under us: the next round takes the image
		}
		if err != nil {
			return Delta{}, err
		}
		for _, e := range ents {
			i := e.GetIndex()
			if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
				_, _, payload, err := decodeEntry(e.GetData())
				if err != nil {
					return Delta{}, fmt.Errorf("entry %d: %w", i, err)
				}
				if len(payload) > 0 {
					recs, err := metadata.DecodeBatch(payload)
					if err != nil {
						return Delta{}, fmt.Errorf("%w: entry %d: %v", ErrCorruptEntry, i, err)
					}
					w.pending = append(w.pending, Delta{Offset: int64(i), Records: recs})
				}
			}
			w.next = int64(i) + 1
		}
	}
}

// image queues the storage's snapshot as an image delta and moves the
// watcher past it.
func (w *localWatcher) image() error {
	snap, err := w.c.storage.Snapshot()
	if err != nil {
		return err
	}
	if raft.IsEmptySnap(snap) {
		return fmt.Errorf("controller: watch: log compacted but no snapshot")
	}
	st, err := metadata.Unmarshal(snap.GetData())
	if err != nil {
		return fmt.Errorf("controller: watch: snapshot: %w", err)
	}
	si := snap.GetMetadata().GetIndex()
	w.pending = append(w.pending, Delta{Offset: st.Offset(), Image: st})
	w.next = int64(si) + 1
	return nil
}

func (w *localWatcher) Close() error {
	w.closed = true
	return nil
}
