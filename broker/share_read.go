package broker

// The share-partition leader's log reads: the batches of a partition from
// a share-partition's NextFetchOffset, with their offsets and what may be
// acquired of them (share.Partition.Acquire archives the rest as gaps).

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
)

// shareLogBatch is one record batch read for a share fetch: its offsets,
// where it lies in the bytes read, and whether it may be acquired (not a
// control batch, not an aborted transaction's under read_committed).
type shareLogBatch struct {
	first, last int64
	start, end  int
	acquirable  bool
}

// shareRead reads p from offset from up to its high watermark (the last
// stable offset for read_committed), at most maxBytes (the first batch
// whole), from the local log or the remote tier. Nothing to read yet (a
// remote read still in the air included) is no batch and no error.
func (n *Node) shareRead(ctx context.Context, p *partition, from, maxBytes int64, readCommitted bool) ([]byte, []shareLogBatch, error) {
	bound := p.hw.Load()
	if readCommitted {
		bound = min(bound, p.log.LastStableOffset())
	}
	if from >= bound {
		return nil, nil, nil
	}
	limit := int(min(max(maxBytes, 1), 1<<31-1))
	var v storage.ReadView
	var err error
	remote := n.tier.servesRemote(p, from)
	if remote {
		var pending bool
		v, pending, err = n.tier.read(ctx, p, from, limit, n.cfg.Tiering.RemoteFetchMaxWait)
		if err == nil && pending {
			return nil, nil, nil
		}
	} else {
		v, err = p.log.Read(from, limit, bound)
	}
	if err != nil {
		return nil, nil, err
	}
	raw, err := v.Bytes()
	next := v.NextOffset
	v.Release()
	if err != nil {
		return nil, nil, err
	}
	var aborted []storage.AbortedTxn
	if readCommitted && len(raw) > 0 {
		if remote {
			if aborted, err = n.tier.abortedTxns(ctx, p, from, next); err != nil {
				return nil, nil, err
			}
		} else {
			aborted = p.log.AbortedTxns(from, next)
		}
	}
	bs, err := shareParseBatches(raw, bound, readCommitted, aborted)
	return raw, bs, err
}

// shareParseBatches splits raw into batches, keeping those entirely below
// bound, and marks which may be acquired: not control batches, and under
// read_committed not the batches of an aborted transaction (a
// transactional batch of a producer whose aborted transaction's range
// [FirstOffset, LastOffset] holds it).
func shareParseBatches(raw []byte, bound int64, readCommitted bool, aborted []storage.AbortedTxn) ([]shareLogBatch, error) {
	var out []shareLogBatch
	pos := 0
	for pos < len(raw) {
		if len(raw)-pos < batch.HeaderSize {
			break // a partial batch at the end of the read (cannot happen: reads are whole batches)
		}
		h, err := batch.ParseHeader(raw[pos:])
		if err != nil {
			return nil, fmt.Errorf("broker: share read: %w", err)
		}
		end := pos + h.Size()
		if end > len(raw) || h.Size() <= 0 {
			break
		}
		if h.LastOffset() >= bound {
			break
		}
		ok := !h.Control()
		if ok && readCommitted && h.Transactional() {
			for _, a := range aborted {
				if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
					ok = false
					break
				}
			}
		}
		out = append(out, shareLogBatch{first: h.BaseOffset, last: h.LastOffset(), start: pos, end: end, acquirable: ok})
		pos = end
	}
	return out, nil
}

// shareAcquirable is what Acquire may hand out of the batches read.
func shareAcquirable(bs []shareLogBatch) []share.Batch {
	out := make([]share.Batch, 0, len(bs))
	for _, b := range bs {
		if b.acquirable {
			out = append(out, share.Batch{First: b.first, Last: b.last})
		}
	}
	return out
}

// shareCover returns the bytes of the batches overlapping [first, last]:
// what a ShareFetch sends with the ranges acquired there (the client keeps
// only the acquired offsets).
func shareCover(raw []byte, bs []shareLogBatch, first, last int64) []byte {
	lo, hi := -1, -1
	for i, b := range bs {
		if b.last < first || b.first > last {
			continue
		}
		if lo < 0 {
			lo = i
		}
		hi = i
	}
	if lo < 0 {
		return nil
	}
	return raw[bs[lo].start:bs[hi].end]
}
