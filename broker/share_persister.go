package broker

// The RPC persister (Kafka's DefaultStatePersister): the share-partition
// leader's share.Persister, sending the share-state RPCs
// (InitializeShareGroupState 83, ReadShareGroupState 84,
// WriteShareGroupState 85, DeleteShareGroupState 86,
// ReadShareGroupStateSummary 87) to the coordinator of each key: the
// leader of its __share_group_state partition in the metadata view (the
// same answer FindCoordinator key type SHARE gives), over the
// inter-broker listener with the inter-broker security, or in process
// when that leader is this broker. The first use creates
// __share_group_state.
//
// Retriable errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
// COORDINATOR_LOAD_IN_PROGRESS, a network error, a timeout; and for 2 s
// UNKNOWN_TOPIC_OR_PARTITION, as the coordinator learns of a new topic
// through its own metadata) are retried
// with a backoff doubling from 50 ms to 1 s, as long as ctx lasts (and at
// most sharePersisterMaxWait when ctx has no deadline); the last such
// error is returned when it ends. Errors are mapped to the Persister
// contract: a read of an uninitialized share-partition (Kafka's
// INVALID_REQUEST) and a summary with start offset -1 are
// share.ErrNoState; FENCED_STATE_EPOCH and FENCED_LEADER_EPOCH are
// returned as kerr errors.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller/metadata"
)

// sharePersisterMaxWait bounds the retries of one call whose ctx has no
// deadline.
const sharePersisterMaxWait = 30 * time.Second

// shareUnknownTopicWait is how long UNKNOWN_TOPIC_OR_PARTITION from a
// coordinator is retried (its metadata may not have the topic yet).
const shareUnknownTopicWait = 2 * time.Second

// shareRPCTimeout bounds one share-state RPC to a remote coordinator.
const shareRPCTimeout = 10 * time.Second

// rpcSharePersister is the node's share.Persister. Safe for concurrent
// use.
type rpcSharePersister struct{ n *Node }

// newShareStatePersister returns the node's RPC persister.
func newShareStatePersister(n *Node) share.Persister { return &rpcSharePersister{n: n} }

// retriableShareErr reports whether a share-state call may succeed if
// retried: the coordinator moves or loads, or the network failed.
func retriableShareErr(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress,
			kerr.NetworkException, kerr.RequestTimedOut, kerr.NotLeaderForPartition, kerr.UnknownServerError:
			return true
		}
		return false
	}
	return err != nil && !errors.Is(err, share.ErrNoState) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// call runs one operation for k against its coordinator until it succeeds,
// fails for good, or ctx (bounded by sharePersisterMaxWait) ends.
// local runs it in process, remote over the wire to broker id.
func (sp *rpcSharePersister) call(ctx context.Context, k share.Key, local func(ctx context.Context) error, remote func(ctx context.Context, cl *kgo.Client) error) error {
	n := sp.n
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sharePersisterMaxWait)
		defer cancel()
	}
	backoff := 50 * time.Millisecond
	start := time.Now()
	var last error
	for {
		err := sp.once(ctx, k, local, remote)
		// The coordinator's metadata may lag the caller's by a moment: an
		// unknown topic is retried for shareUnknownTopicWait.
		unknown := errors.Is(err, kerr.UnknownTopicOrPartition) && time.Since(start) < shareUnknownTopicWait
		if err == nil || !retriableShareErr(err) && !unknown {
			return err
		}
		last = err
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("share state of %s-%d: %w (%v)", k.Group, k.Partition, last, ctx.Err())
		case <-n.ctx.Done():
			t.Stop()
			return fmt.Errorf("share state: %w (broker closing)", kerr.CoordinatorNotAvailable)
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (sp *rpcSharePersister) once(ctx context.Context, k share.Key, local func(ctx context.Context) error, remote func(ctx context.Context, cl *kgo.Client) error) error {
	n := sp.n
	sc := n.shares
	index, err := sc.partitionOf(k)
	if err != nil {
		cctx, cancel := context.WithTimeout(ctx, findCoordinatorCreateWait)
		terr := sc.ensureTopic(cctx)
		cancel()
		if terr != nil {
			n.logger.Debug("broker: create "+shareStateTopic+" for the persister", "err", terr)
		}
		return kerr.CoordinatorNotAvailable
	}
	leader := metadata.NoLeader
	n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(shareStateTopic); ok {
			if p, ok := st.Partition(t.ID, index); ok {
				leader = p.Leader
			}
		}
	})
	switch leader {
	case metadata.NoLeader:
		return kerr.CoordinatorNotAvailable
	case n.cfg.NodeID:
		return local(ctx)
	}
	cl, err := sc.clients.get(n, leader, "share-persister")
	if err != nil {
		return kerr.NetworkException
	}
	rctx, cancel := context.WithTimeout(ctx, shareRPCTimeout)
	defer cancel()
	if err := remote(rctx, cl); err != nil {
		var ke *kerr.Error
		if !errors.As(err, &ke) && !errors.Is(err, share.ErrNoState) {
			n.logger.Debug("broker: share-state request", "coordinator", leader, "err", err)
			sc.clients.drop(leader, cl)
			return kerr.NetworkException
		}
		return err
	}
	return nil
}

// request sends req to the seed broker of cl (the coordinator).
func shareRequest(ctx context.Context, cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	bs := cl.SeedBrokers()
	if len(bs) == 0 {
		return nil, errors.New("broker: no coordinator connection")
	}
	return bs[0].Request(ctx, req)
}

// Initialize implements share.Persister.
func (sp *rpcSharePersister) Initialize(ctx context.Context, k share.Key, stateEpoch int32, startOffset int64) error {
	return sp.call(ctx, k, func(ctx context.Context) error {
		return sp.n.shares.initialize(ctx, k, stateEpoch, startOffset)
	}, func(ctx context.Context, cl *kgo.Client) error {
		req := kmsg.NewPtrInitializeShareGroupStateRequest()
		req.GroupID = k.Group
		t := kmsg.NewInitializeShareGroupStateRequestTopic()
		t.TopicID = k.TopicID
		p := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		p.Partition, p.StateEpoch, p.StartOffset = k.Partition, stateEpoch, startOffset
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := shareRequest(ctx, cl, req)
		if err != nil {
			return err
		}
		for _, rt := range resp.(*kmsg.InitializeShareGroupStateResponse).Topics {
			for _, rp := range rt.Partitions {
				if rt.TopicID == k.TopicID && rp.Partition == k.Partition {
					return kerr.ErrorForCode(rp.ErrorCode)
				}
			}
		}
		return kerr.UnknownServerError
	})
}

// Read implements share.Persister.
func (sp *rpcSharePersister) Read(ctx context.Context, k share.Key, leaderEpoch int32) (share.PersistedState, error) {
	var out share.PersistedState
	err := sp.call(ctx, k, func(ctx context.Context) error {
		st, err := sp.n.shares.read(ctx, k, leaderEpoch)
		out = st
		return err
	}, func(ctx context.Context, cl *kgo.Client) error {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = k.Group
		t := kmsg.NewReadShareGroupStateRequestTopic()
		t.TopicID = k.TopicID
		p := kmsg.NewReadShareGroupStateRequestTopicPartition()
		p.Partition, p.LeaderEpoch = k.Partition, leaderEpoch
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := shareRequest(ctx, cl, req)
		if err != nil {
			return err
		}
		for _, rt := range resp.(*kmsg.ReadShareGroupStateResponse).Topics {
			for _, rp := range rt.Partitions {
				if rt.TopicID != k.TopicID || rp.Partition != k.Partition {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
				out = share.PersistedState{StateEpoch: rp.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: rp.StartOffset, DeliveryCompleteCount: -1}
				for _, b := range rp.StateBatches {
					out.Batches = append(out.Batches, share.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
						DeliveryState: share.RecordState(b.DeliveryState), DeliveryCount: b.DeliveryCount})
				}
				return nil
			}
		}
		return kerr.UnknownServerError
	})
	if errors.Is(err, kerr.InvalidRequest) {
		return share.PersistedState{}, share.ErrNoState // Kafka: a read of an uninitialized share-partition
	}
	return out, err
}

// Write implements share.Persister.
func (sp *rpcSharePersister) Write(ctx context.Context, k share.Key, stateEpoch, leaderEpoch int32, u share.Update) error {
	return sp.call(ctx, k, func(ctx context.Context) error {
		return sp.n.shares.write(ctx, k, stateEpoch, leaderEpoch, u)
	}, func(ctx context.Context, cl *kgo.Client) error {
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.GroupID = k.Group
		t := kmsg.NewWriteShareGroupStateRequestTopic()
		t.TopicID = k.TopicID
		p := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		p.Partition, p.StateEpoch, p.LeaderEpoch, p.StartOffset = k.Partition, stateEpoch, leaderEpoch, u.StartOffset
		p.DeliveryCompleteCount = u.DeliveryCompleteCount
		for _, b := range u.Batches {
			sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
			sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, int8(b.DeliveryState), b.DeliveryCount
			p.StateBatches = append(p.StateBatches, sb)
		}
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := shareRequest(ctx, cl, req)
		if err != nil {
			return err
		}
		for _, rt := range resp.(*kmsg.WriteShareGroupStateResponse).Topics {
			for _, rp := range rt.Partitions {
				if rt.TopicID == k.TopicID && rp.Partition == k.Partition {
					return kerr.ErrorForCode(rp.ErrorCode)
				}
			}
		}
		return kerr.UnknownServerError
	})
}

// Delete implements share.Persister.
func (sp *rpcSharePersister) Delete(ctx context.Context, k share.Key) error {
	return sp.call(ctx, k, func(ctx context.Context) error {
		return sp.n.shares.delete(ctx, k)
	}, func(ctx context.Context, cl *kgo.Client) error {
		req := kmsg.NewPtrDeleteShareGroupStateRequest()
		req.GroupID = k.Group
		t := kmsg.NewDeleteShareGroupStateRequestTopic()
		t.TopicID = k.TopicID
		p := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
		p.Partition = k.Partition
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := shareRequest(ctx, cl, req)
		if err != nil {
			return err
		}
		for _, rt := range resp.(*kmsg.DeleteShareGroupStateResponse).Topics {
			for _, rp := range rt.Partitions {
				if rt.TopicID == k.TopicID && rp.Partition == k.Partition {
					return kerr.ErrorForCode(rp.ErrorCode)
				}
			}
		}
		return kerr.UnknownServerError
	})
}

// Summary implements share.Persister.
func (sp *rpcSharePersister) Summary(ctx context.Context, k share.Key) (share.PersistedState, error) {
	var out share.PersistedState
	found := false
	err := sp.call(ctx, k, func(ctx context.Context) error {
		st, ok, err := sp.n.shares.summary(ctx, k)
		out, found = st, ok
		return err
	}, func(ctx context.Context, cl *kgo.Client) error {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.GroupID = k.Group
		t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		t.TopicID = k.TopicID
		p := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		p.Partition, p.LeaderEpoch = k.Partition, -1
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := shareRequest(ctx, cl, req)
		if err != nil {
			return err
		}
		for _, rt := range resp.(*kmsg.ReadShareGroupStateSummaryResponse).Topics {
			for _, rp := range rt.Partitions {
				if rt.TopicID != k.TopicID || rp.Partition != k.Partition {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
				out = share.PersistedState{StateEpoch: rp.StateEpoch, LeaderEpoch: rp.LeaderEpoch, StartOffset: rp.StartOffset,
					DeliveryCompleteCount: rp.DeliveryCompleteCount}
				found = rp.StartOffset >= 0
				return nil
			}
		}
		return kerr.UnknownServerError
	})
	if err != nil {
		return share.PersistedState{}, err
	}
	if !found {
		return share.PersistedState{}, share.ErrNoState
	}
	return out, nil
}

// interBrokerClients holds one kgo client per remote broker's
// inter-broker listener.
type interBrokerClients struct {
	mu  sync.Mutex
	cls map[int32]*txnClient
}

// get returns the client to broker id (purpose names it in its client id).
func (c *interBrokerClients) get(n *Node, id int32, purpose string) (*kgo.Client, error) {
	addr := n.interBrokerAddr(id)
	if addr == "" {
		return nil, fmt.Errorf("broker: no inter-broker listener of broker %d", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cls == nil {
		c.cls = map[int32]*txnClient{}
	}
	if cur := c.cls[id]; cur != nil {
		if cur.addr == addr {
			return cur.cl, nil
		}
		cur.cl.Close()
		delete(c.cls, id)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.Dialer(n.dialContext),
		n.interBrokerSASL(),
		kgo.ClientID(fmt.Sprintf("strata-%s-%d-to-%d", purpose, n.cfg.NodeID, id)),
	)
	if err != nil {
		return nil, err
	}
	c.cls[id] = &txnClient{addr: addr, cl: cl}
	return cl, nil
}

// drop closes broker id's client after a failed request, if it is still cl.
func (c *interBrokerClients) drop(id int32, cl *kgo.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.cls[id]; cur != nil && cur.cl == cl {
		cur.cl.Close()
		delete(c.cls, id)
	}
}

// closeAll closes every client.
func (c *interBrokerClients) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cur := range c.cls {
		cur.cl.Close()
		delete(c.cls, id)
	}
}
