package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/txncoord"
	"github.com/strata-io/strata/controller/metadata"
)

// verifyTxnPartitions asks the coordinator of txnID whether each
// partition of tps is in producerID's ongoing transaction (KIP-890 part
// 1) and returns the coordinator's code per partition: NONE when it is,
// TRANSACTION_ABORTABLE when not, PRODUCER_FENCED,
// INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS (a PrepareX),
// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
// COORDINATOR_NOT_AVAILABLE, or NETWORK_EXCEPTION when the coordinator
// could not be asked. The caller maps them for its request version
// (txncoord.LeaderVerifyCode).
//
// When this broker serves txnID's __transaction_state partition (loaded
// or loading) the coordinator is asked in-process; otherwise its leader
// gets an AddPartitionsToTxn v4+ with VerifyOnly over the inter-broker
// listener, as Kafka's AddPartitionsToTxnManager sends it.
func (n *Node) verifyTxnPartitions(ctx context.Context, txnID string, producerID int64, epoch int16, tps map[string][]int32) map[string]map[int32]int16 {
	vr := txncoord.VerifyRequest{TxnID: txnID, ProducerID: producerID, Epoch: epoch}
	for _, t := range slices.Sorted(maps.Keys(tps)) {
		for _, p := range tps[t] {
			vr.Partitions = append(vr.Partitions, txncoord.TopicPartition{Topic: t, Partition: p})
		}
	}
	var prs []txncoord.PartitionResult
	local := false
	part := txncoord.PartitionFor(txnID, n.cfg.TxnStatePartitions)
	n.txns.locked(func(c *txncoord.Coordinator) {
		if st, _ := c.PartitionState(part); st != txncoord.NotOwned || txnID == "" {
			local = true
			prs = c.Verify(vr)
		}
	})
	if !local {
		prs = n.txns.verifyRemote(ctx, part, vr)
	}
	out := map[string]map[int32]int16{}
	for t, ps := range tps {
		out[t] = map[int32]int16{}
		for _, p := range ps {
			out[t][p] = kerr.UnknownServerError.Code
		}
	}
	for _, pr := range prs {
		if m := out[pr.Partition.Topic]; m != nil {
			m[pr.Partition.Partition] = pr.Err
		}
	}
	return out
}

// txnClients holds one kgo client per remote coordinator broker, for
// verify-only AddPartitionsToTxn requests.
type txnClients struct {
	mu  sync.Mutex
	cls map[int32]*txnClient
}

type txnClient struct {
	addr string
	cl   *kgo.Client
}

// verifyRemote sends vr to the leader of __transaction_state partition
// part as a verify-only AddPartitionsToTxn.
func (tc *txnCoordinator) verifyRemote(ctx context.Context, part int32, vr txncoord.VerifyRequest) []txncoord.PartitionResult {
	n := tc.n
	all := func(code int16) []txncoord.PartitionResult {
		out := make([]txncoord.PartitionResult, len(vr.Partitions))
		for i, tp := range vr.Partitions {
			out[i] = txncoord.PartitionResult{Partition: tp, Err: code}
		}
		return out
	}
	leader := metadata.NoLeader
	n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(txnStateTopic); ok {
			if p, ok := st.Partition(t.ID, part); ok {
				leader = p.Leader
			}
		}
	})
	switch leader {
	case metadata.NoLeader:
		return all(kerr.CoordinatorNotAvailable.Code)
	case n.cfg.NodeID:
		return all(kerr.CoordinatorLoadInProgress.Code) // reconcile has not told the coordinator yet
	}
	cl, err := tc.client(leader)
	if err != nil {
		return all(kerr.NetworkException.Code)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = vr.TxnID, vr.ProducerID, vr.Epoch, true
	for _, tp := range vr.Partitions {
		if k := len(rt.Topics); k == 0 || rt.Topics[k-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic = tp.Topic
			rt.Topics = append(rt.Topics, t)
		}
		t := &rt.Topics[len(rt.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	req.Transactions = append(req.Transactions, rt)
	rctx, cancel := context.WithTimeout(ctx, txnMarkerRequestTimeout)
	defer cancel()
	bs := cl.SeedBrokers()
	if len(bs) == 0 {
		return all(kerr.NetworkException.Code)
	}
	kresp, err := bs[0].Request(rctx, req)
	if err != nil {
		n.logger.Debug("broker: verify transaction partitions", "coordinator", leader, "err", err)
		tc.dropClient(leader, cl)
		return all(kerr.NetworkException.Code)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.Version < 4 {
		return all(kerr.UnsupportedVersion.Code)
	}
	if resp.ErrorCode != 0 {
		return all(resp.ErrorCode)
	}
	codes := map[txncoord.TopicPartition]int16{}
	for _, t := range resp.Transactions {
		if t.TransactionalID != vr.TxnID {
			continue
		}
		for _, tt := range t.Topics {
			for _, p := range tt.Partitions {
				codes[txncoord.TopicPartition{Topic: tt.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	out := all(kerr.UnknownServerError.Code)
	for i, tp := range vr.Partitions {
		if c, ok := codes[tp]; ok {
			out[i].Err = c
		}
	}
	return out
}

// client returns the kgo client to broker id's inter-broker listener.
func (tc *txnCoordinator) client(id int32) (*kgo.Client, error) {
	n := tc.n
	addr := n.interBrokerAddr(id)
	if addr == "" {
		return nil, fmt.Errorf("broker: no inter-broker listener of broker %d", id)
	}
	tc.clients.mu.Lock()
	defer tc.clients.mu.Unlock()
	if tc.clients.cls == nil {
		tc.clients.cls = map[int32]*txnClient{}
	}
	if c := tc.clients.cls[id]; c != nil {
		if c.addr == addr {
			return c.cl, nil
		}
		c.cl.Close()
		delete(tc.clients.cls, id)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.Dialer(n.dialContext),
		n.interBrokerSASL(),
		kgo.ClientID(fmt.Sprintf("strata-txn-verify-%d-to-%d", n.cfg.NodeID, id)),
	)
	if err != nil {
		return nil, err
	}
	tc.clients.cls[id] = &txnClient{addr: addr, cl: cl}
	return cl, nil
}

// dropClient closes broker id's client after a failed request, if it is
// still cl.
func (tc *txnCoordinator) dropClient(id int32, cl *kgo.Client) {
	tc.clients.mu.Lock()
	defer tc.clients.mu.Unlock()
	if c := tc.clients.cls[id]; c != nil && c.cl == cl {
		c.cl.Close()
		delete(tc.clients.cls, id)
	}
}

// closeClients closes every verify client.
func (tc *txnCoordinator) closeClients() {
	tc.clients.mu.Lock()
	defer tc.clients.mu.Unlock()
	for id, c := range tc.clients.cls {
		c.cl.Close()
		delete(tc.clients.cls, id)
	}
}
