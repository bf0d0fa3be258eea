package broker

// Fetch (key 1), versions 4 (the first with record batch v2) through
// kmsg's newest (18; topics by id from v13).
//
// Behaviour: each partition is read from its log at the fetch offset, up to
// the high watermark, as whole batches exactly as stored. Byte limits
// follow KIP-74: PartitionMaxBytes per partition and MaxBytes for the
// response, except that the first batch of the first partition with data
// is returned whole even when larger, so a consumer always makes progress.
// Later partitions whose next batch does not fit the remaining budget get
// no records.
//
// Long polling: when fewer than MinBytes are available and MaxWaitMs > 0,
// the request registers a waiter on each of its partitions and sleeps until
// an append raises one's high watermark, the deadline passes, or the
// connection or node closes; then it reads again. No polling loop.
//
// Zero copy: record bytes never enter the Go heap. The response is encoded
// by kmsg with a unique 20-byte placeholder in each partition's
// RecordBatches; the placeholders are then found in order and cut out,
// their length prefixes (int32 before v12, uvarint from v12) rewritten for
// the real size, and the frame remembers where each storage ReadView goes.
// The writer sends the bytes around the regions and sendfile(2)s each
// region from the segment file. (The alternative, hand-encoding everything
// but the records, would duplicate kmsg's codec for 15 versions.)
//
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID,
// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
// (v9+, KIP-320), OFFSET_OUT_OF_RANGE, KAFKA_STORAGE_ERROR.
//
// Differences from Kafka: no fetch sessions yet (KIP-227): the response's
// SessionID is 0, which tells the client none was created, and every fetch
// is a full fetch; a request naming a session gets
// FETCH_SESSION_ID_NOT_FOUND. Follower fetches (replica id >= 0) are
// served like consumer fetches until replication exists. Read-committed
// reads stop at the high watermark (there are no transactions yet).

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/storage"
)

func init() { register(1, 4, false, handleFetch) }

const markerLen = 20

// fetchPart is one requested partition during a fetch.
type fetchPart struct {
	topic   string
	req     *kmsg.FetchRequestTopicPartition
	p       *partition
	err     error
	view    storage.ReadView
	hasView bool
}

func handleFetch(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.FetchRequest)
	resp := kmsg.NewPtrFetchResponse()
	if req.SessionID != 0 || req.SessionEpoch > 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return encodeResponse(r, resp), nil
	}
	// Resolve every partition once.
	var parts [][]fetchPart // per request topic
	for ti := range req.Topics {
		t := &req.Topics[ti]
		name, exists, topicErr := n.resolveTopic(r.version >= 13, t.Topic, t.TopicID)
		ps := make([]fetchPart, len(t.Partitions))
		for pi := range t.Partitions {
			fp := &ps[pi]
			fp.topic, fp.req = name, &t.Partitions[pi]
			if topicErr != nil {
				fp.err = topicErr
				continue
			}
			if fp.p = n.partition(name, fp.req.Partition); fp.p == nil {
				fp.err = n.missingPartitionErr(name, exists, fp.req.Partition)
			}
		}
		parts = append(parts, ps)
	}

	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	deadline := time.Now().Add(wait)
	var w *waiter
	var timer *time.Timer
	stopping := false
	defer func() {
		if w != nil {
			for _, ps := range parts {
				for i := range ps {
					if ps[i].p != nil {
						ps[i].p.removeWaiter(w)
					}
				}
			}
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Register before reading, so an append between the read and the
		// wait still wakes us.
		if w == nil && wait > 0 && req.MinBytes > 0 {
			w = newWaiter()
			for _, ps := range parts {
				for i := range ps {
					if ps[i].p != nil {
						ps[i].p.addWaiter(w)
					}
				}
			}
		}
		total, anyErr := n.readFetch(parts, req, r.version)
		if anyErr || total >= int64(max(req.MinBytes, 1)) || w == nil || ctx.Err() != nil || stopping {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		releaseFetch(parts)
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		select {
		case <-w.c:
		case <-timer.C:
		case <-ctx.Done():
		case <-n.stopping:
			stopping = true // shutdown: answer with what there is now
		}
	}
	return encodeFetch(r, resp, parts)
}

// readFetch reads every partition into its view, within the byte limits.
// It returns the bytes read and whether any partition has an error (which
// answers the fetch at once, as Kafka does).
func (n *Node) readFetch(parts [][]fetchPart, req *kmsg.FetchRequest, version int16) (int64, bool) {
	budget := int64(req.MaxBytes)
	if budget <= 0 {
		budget = 1<<31 - 1
	}
	var total int64
	anyErr := false
	for _, ps := range parts {
		for i := range ps {
			fp := &ps[i]
			if fp.p == nil {
				anyErr = true
				continue
			}
			epoch := int32(-1)
			if version >= 9 {
				epoch = fp.req.CurrentLeaderEpoch
			}
			if fp.err = fp.p.checkLeader(epoch); fp.err != nil {
				anyErr = true
				continue
			}
			limit := min(int64(fp.req.PartitionMaxBytes), budget-total)
			if limit <= 0 {
				if total > 0 {
					continue
				}
				limit = 1 // still the first batch whole (KIP-74)
			}
			v, err := fp.p.log.Read(fp.req.FetchOffset, int(min(limit, 1<<31-1)), fp.p.hw.Load())
			if err != nil {
				fp.err = err
				anyErr = true
				continue
			}
			if v.Size == 0 {
				v.Release()
				continue
			}
			if total > 0 && v.Size > limit {
				// KIP-74's first-batch exception is for the first
				// partition with data only.
				v.Release()
				continue
			}
			fp.view, fp.hasView = v, true
			total += v.Size
		}
	}
	return total, anyErr
}

func releaseFetch(parts [][]fetchPart) {
	for _, ps := range parts {
		for i := range ps {
			if ps[i].hasView {
				ps[i].view.Release()
				ps[i].hasView = false
			}
		}
	}
}

// encodeFetch builds the response frame: kmsg encodes everything with
// placeholders in RecordBatches, which are then replaced by splices of the
// views (see the file comment). The views' ownership passes to the frame.
func encodeFetch(r *request, resp *kmsg.FetchResponse, parts [][]fetchPart) (*frame, error) {
	var nonce [16]byte
	binary.LittleEndian.PutUint64(nonce[0:], rand.Uint64())
	binary.LittleEndian.PutUint64(nonce[8:], rand.Uint64())
	var views []storage.ReadView
	var markers [][]byte
	for ti, ps := range parts {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = r.msg.(*kmsg.FetchRequest).Topics[ti].Topic
		rt.TopicID = r.msg.(*kmsg.FetchRequest).Topics[ti].TopicID
		for i := range ps {
			fp := &ps[i]
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.req.Partition
			// Empty, not null: librdkafka rejects a null record set
			// ("invalid MessageSetSize -1"), and Kafka never sends one.
			rp.RecordBatches = []byte{}
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			if fp.p != nil {
				hw := fp.p.hw.Load()
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, hw, fp.p.log.LogStartOffset()
			}
			if fp.err != nil {
				rp.ErrorCode = errCode(fp.err)
				if errors.Is(fp.err, storage.ErrOffsetOutOfRange) {
					rp.ErrorCode = kerr.OffsetOutOfRange.Code
				}
			}
			if fp.hasView {
				m := make([]byte, markerLen)
				copy(m, nonce[:])
				binary.BigEndian.PutUint32(m[16:], uint32(len(markers)))
				markers = append(markers, m)
				views = append(views, fp.view)
				fp.hasView = false
				rp.RecordBatches = m
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	f := encodeResponse(r, resp)
	if len(markers) == 0 {
		return f, nil
	}
	flexible := r.version >= 12
	enc := f.buf
	out := make([]byte, 0, len(enc)+len(markers)*4)
	pos := 0
	var spliced int64
	for i, m := range markers {
		at := bytes.Index(enc[pos:], m)
		if at < 0 {
			for _, v := range views {
				v.Release()
			}
			return nil, fmt.Errorf("broker: fetch placeholder %d not found", i)
		}
		at += pos
		prefixLen := 4
		if flexible {
			prefixLen = 1 // uvarint(markerLen+1) fits one byte
		}
		out = append(out, enc[pos:at-prefixLen]...)
		size := views[i].Size
		if flexible {
			out = binary.AppendUvarint(out, uint64(size)+1)
		} else {
			out = binary.BigEndian.AppendUint32(out, uint32(size))
		}
		f.splices = append(f.splices, splice{at: len(out), view: views[i]})
		spliced += size
		pos = at + markerLen
	}
	out = append(out, enc[pos:]...)
	binary.BigEndian.PutUint32(out, uint32(int64(len(out)-sizeLen)+spliced))
	f.buf = out
	return f, nil
}
