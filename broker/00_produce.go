package broker

// Produce (key 0), versions 3 (the first with record batch v2) through
// kmsg's newest (13; topics by id from v13).
//
// Behaviour: acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every
// partition). Each partition's record set goes to the partition's log as
// the leader appends it: storage validates every batch (CRC, magic 2,
// framing, sizes, timestamps; compressed batches are decompressed only to
// be counted and checked, and are stored as sent), assigns offsets in place
// and appends with one write. LogAppendTime topics get the append time
// back.
//
// acks=-1 (REPLICATION.md §1.5): NOT_ENOUGH_REPLICAS before appending while
// the committed ISR is below the effective min ISR (min(min.insync.replicas,
// RF)); else the append, then a wait ("purgatory") until the high
// watermark passes the batch's last offset, within the request's
// TimeoutMillis: success, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the maximal ISR
// fell below the min ISR), REQUEST_TIMED_OUT, or NOT_LEADER_OR_FOLLOWER
// (leadership lost meanwhile, or the node shutting down). The wait does not
// hold the connection's executor: the appends happen in order, and the
// response is a deferred frame (conn.go) the writer sends, in order, once
// complete, so a pipelining producer keeps max.in.flight requests
// appending. A duplicate of an idempotent producer waits for its
// original's offsets the same way. Waiters are woken in offset order by
// the HW move (replica_leader.go), not polled. acks=1 answers after the
// local append. With a single replica the HW moves with the append and
// acks=-1 answers at once.
//
// Errors per
// partition: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id),
// INVALID_TOPIC_EXCEPTION, NOT_LEADER_OR_FOLLOWER, and storage's
// CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
// INVALID_TIMESTAMP, UNSUPPORTED_COMPRESSION_TYPE, KAFKA_STORAGE_ERROR.
//
// A compacted topic refuses records without a key: the whole batch fails
// with INVALID_RECORD (none of it is appended) and, from v8 (KIP-467),
// ErrorRecords lists every keyless record's index in the batch with
// Kafka's messages; clients fail those records with INVALID_RECORD and the
// batch's others with a retriable "different record" error.
//
// Each partition carries exactly one batch with base offset 0 (Kafka's
// LogValidator and UnifiedLog: INVALID_RECORD otherwise). Batches of
// idempotent producers (producer id >= 0) are checked against the
// partition's producer state (idempotence.go, storage/producer): a batch
// repeating one of the producer's last five is acknowledged with its
// original base offset and not appended again; a sequence gap or a new
// epoch not starting at 0 gets OUT_OF_ORDER_SEQUENCE_NUMBER, an epoch older
// than the producer's INVALID_PRODUCER_EPOCH. Invalid batches are answered
// as invalid before any producer check, as in Kafka.
//
// The requests of one connection run one at a time in arrival order
// (conn.go), so pipelined produces (max.in.flight > 1) append in order;
// the partitions of one request append in parallel (appendParallel), and
// the connection's reader reads and decodes the next requests meanwhile.
//
// acks=0 gets no response; as in Kafka, an acks=0 request with any failed
// partition closes the connection, which is how the client learns of it.
//
// Transactional batches: a transactional id is required
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition otherwise),
// and KIP-890 part 1 verification (txn_produce.go).
//
// Differences from Kafka: a
// duplicate on a CreateTime topic answers LogAppendTime -1 (Kafka echoes
// the batch's max timestamp there); a duplicate or out-of-sequence batch
// is checked for corruption and size but not for timestamps.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/quota"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
)

func init() { register(0, 3, handleProduce) }

func handleProduce(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ProduceRequest)
	resp := kmsg.NewPtrProduceResponse()
	badAcks := req.Acks != -1 && req.Acks != 0 && req.Acks != 1
	failed := 0
	nowMs := time.Now().UnixMilli()
	var waits []produceWait
	// Transactional batches (txn_produce.go): a transactional id is
	// required, and KIP-890 verification runs before the appends.
	txnReq := hasTransactionalBatch(req)
	var txnErr error
	var plan txnProducePlan
	az := n.authorizer() // authorize.go: WRITE on the transactional id and on each topic
	if txnReq && (req.TransactionID == nil || !r.allowed(az, authz.OpWrite, authz.ResTransactionalID, *req.TransactionID)) {
		txnErr = kerr.TransactionalIDAuthorizationFailed
	} else if txnReq && !badAcks {
		names := make([]string, len(req.Topics))
		for i, t := range req.Topics {
			if name, _, err := n.resolveTopic(r.version >= 13, t.Topic, t.TopicID); err == nil {
				names[i] = name
			}
		}
		plan = n.planTxnProduce(ctx, req, names, r.version)
	}
	// Three passes: the checks that need no log, in request order; the
	// appends, partitions in parallel (appendParallel); the answers, in
	// request order again.
	var jobs []produceJob
	for ti, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, exists, topicErr := n.resolveTopic(r.version >= 13, t.Topic, t.TopicID)
		if authName := cmp.Or(name, t.Topic); authName != "" && !r.allowed(az, authz.OpWrite, authz.ResTopic, authName) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for pi, tp := range t.Partitions {
			rp := &rt.Partitions[pi]
			rp.Default()
			rp.Partition = tp.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			var err error
			switch {
			case badAcks:
				err = kerr.InvalidRequiredAcks
			case txnErr != nil:
				err = txnErr
			case topicErr != nil:
				err = topicErr
			case plan.errs[txnProduceKey{name, tp.Partition}] != nil:
				err = plan.errs[txnProduceKey{name, tp.Partition}]
			default:
				jobs = append(jobs, produceJob{
					topic: name, exists: exists, tp: tp, at: [2]int{ti, pi},
					txn: &txnAppend{guard: plan.guards[txnProduceKey{name, tp.Partition}], version: r.version},
				})
			}
			if err != nil {
				failed++
				r.setProduceError(rp, err)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	void := n.presumedFenced() // once per request: this node's leaderships are void (node.go)
	n.appendParallel(jobs, func(j *produceJob) {
		rp := &resp.Topics[j.at[0]].Partitions[j.at[1]]
		j.wait, j.err = n.producePartition(j.topic, j.exists, j.tp, req.Acks, nowMs, j.txn, void, rp)
	})
	for i := range jobs {
		j := &jobs[i]
		if j.err != nil {
			failed++
			r.setProduceError(&resp.Topics[j.at[0]].Partitions[j.at[1]], j.err)
		}
		if j.wait != nil {
			j.wait.topic, j.wait.part = j.at[0], j.at[1]
			waits = append(waits, *j.wait)
		}
	}
	if h := n.produceHook.Load(); h != nil {
		if err := (*h)(req); err != nil {
			return nil, err
		}
	}
	// producer_byte_rate (quotas.go): the request's bytes; a throttle is
	// in the response and mutes the connection (acks=0: only mutes).
	n.recordQuota(r, quota.Produce, float64(r.size))
	if req.Acks == 0 {
		if failed > 0 {
			return nil, fmt.Errorf("broker: acks=0 produce failed for %d partitions", failed)
		}
		return nil, nil
	}
	if len(waits) > 0 {
		return n.deferProduce(ctx, r, req, resp, waits), nil
	}
	return encodeResponse(r, resp), nil
}

// setProduceError answers partition rp with err: Kafka's code, counted,
// and from v8 its message (KIP-467: each invalid record's index too).
func (r *request) setProduceError(rp *kmsg.ProduceResponseTopicPartition, err error) {
	rp.ErrorCode = errCode(err)
	r.metrics().partitionError("Produce", rp.ErrorCode)
	if r.version >= 8 {
		rp.ErrorMessage = kmsg.StringPtr(err.Error())
		var ire *storage.InvalidRecordsError
		if errors.As(err, &ire) {
			// KIP-467: Kafka's message, and each invalid
			// record's index in the batch.
			rp.ErrorMessage = kmsg.StringPtr(ire.Error())
			for _, re := range ire.Records {
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				er.RelativeOffset, er.ErrorMessage = re.Index, kmsg.StringPtr(re.Message)
				rp.ErrorRecords = append(rp.ErrorRecords, er)
			}
		}
	}
}

// produceJob is one partition's append of a request: where its answer
// goes (at: topic and partition index in the request), and its outcome.
type produceJob struct {
	topic  string
	exists bool
	tp     kmsg.ProduceRequestTopicPartition
	txn    *txnAppend
	at     [2]int
	wait   *produceWait
	err    error
}

// appendParallel runs fn for every job, the jobs of different partitions
// in parallel on at most GOMAXPROCS goroutines, and returns when all are
// done. Jobs of the same partition (a request naming one twice) run one
// after the other in request order, on one goroutine. A partition's appends
// from successive requests stay in order: a connection's next request
// runs only after this returns (conn.go's executor), and requests of
// different connections meet at the partition's append lock as before.
// A panic in fn is re-raised here, on the handler's goroutine, where the
// connection's executor recovers it.
func (n *Node) appendParallel(jobs []produceJob, fn func(*produceJob)) {
	if len(jobs) <= 1 {
		for i := range jobs {
			fn(&jobs[i])
		}
		return
	}
	// Group by partition; a group is the unit of parallelism.
	idx := make(map[tpKey]int, len(jobs))
	groups := make([][]int, 0, len(jobs))
	for i := range jobs {
		k := tpKey{jobs[i].topic, jobs[i].tp.Partition}
		g, ok := idx[k]
		if !ok {
			g = len(groups)
			idx[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	workers := min(runtime.GOMAXPROCS(0), len(groups))
	if workers <= 1 {
		for i := range jobs {
			fn(&jobs[i])
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Pointer[any]
	work := func() {
		defer wg.Done()
		defer func() {
			if p := recover(); p != nil {
				panicked.CompareAndSwap(nil, &p)
			}
		}()
		for {
			g := int(next.Add(1) - 1)
			if g >= len(groups) {
				return
			}
			for _, i := range groups[g] {
				fn(&jobs[i])
			}
		}
	}
	wg.Add(workers)
	for range workers - 1 {
		go work()
	}
	work() // the handler's goroutine is one of the workers
	wg.Wait()
	if p := panicked.Load(); p != nil {
		panic(*p)
	}
}

// produceWait is an acks=-1 partition whose batch the HW does not cover
// yet: response entry resp.Topics[topic].Partitions[part].
type produceWait struct {
	p           *partition
	last        int64 // the batch's last offset: done when HW > last
	epoch       int32 // the leader epoch it was appended in
	topic, part int
}

// deferProduce answers an acks=-1 produce once every waiting partition's
// HW covers its batch, or the request's timeout passes, in a frame the
// connection's writer waits for (conn.go) while the executor runs the next
// requests.
func (n *Node) deferProduce(ctx context.Context, r *request, req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, waits []produceWait) *frame {
	d := &deferred{done: make(chan struct{})}
	timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	go func() {
		defer close(d.done)
		waitStart := time.Now()
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		go func() {
			select {
			case <-n.stopping:
				cancel() // shutdown: answer now, the client retries elsewhere
			case <-wctx.Done():
			}
		}()
		for _, w := range waits {
			rp := &resp.Topics[w.topic].Partitions[w.part]
			err := w.p.waitHWInEpoch(wctx, w.last, w.epoch)
			switch {
			case err == nil:
				err = w.p.acksAllResult()
			case errors.Is(err, context.DeadlineExceeded) && n.presumedFenced():
				// Cut off from the controller: the batch may be on a
				// new leader's log or not, as with any leader change.
				err = kerr.NotLeaderForPartition
			case errors.Is(err, context.DeadlineExceeded):
				err = kerr.RequestTimedOut
			case errors.Is(err, context.Canceled):
				err = kerr.NotLeaderForPartition
			}
			if err != nil {
				rp.ErrorCode = errCode(err)
				rp.BaseOffset, rp.LogAppendTime = -1, -1
				r.metrics().partitionError("Produce", rp.ErrorCode)
				if r.version >= 8 {
					rp.ErrorMessage = kmsg.StringPtr(err.Error())
				}
			}
		}
		r.waited += time.Since(waitStart) // not handler time (request_percentage)
		d.f = encodeResponse(r, resp)
	}()
	return &frame{later: d}
}

// producePartition appends one partition's records; for acks=-1 it
// returns what to wait for when the HW does not cover the batch yet.
func (n *Node) producePartition(topic string, topicExists bool, tp kmsg.ProduceRequestTopicPartition, acks int16, nowMs int64, txn *txnAppend, void bool, rp *kmsg.ProduceResponseTopicPartition) (*produceWait, error) {
	if topic == offsetsTopic || topic == txnStateTopic || topic == shareStateTopic {
		// Kafka: "Cannot append to internal topic" for clients (only the
		// coordinators write them, coordinator.go, txn_coordinator.go).
		return nil, kerr.InvalidTopicException
	}
	p := n.partition(topic, tp.Partition)
	if p == nil {
		return nil, n.missingPartitionErr(topic, topicExists, tp.Partition)
	}
	if err := p.checkLeader(-1); err != nil {
		return nil, err
	}
	if void {
		return nil, kerr.NotLeaderForPartition // presumed fenced: its leadership is void (node.go)
	}
	if acks == -1 {
		if err := p.acksAllCheck(); err != nil {
			return nil, err
		}
	}
	epoch := p.leaderEpoch.Load()
	res, err := p.appendRecords(tp.Records, epoch, nowMs, txn)
	if err != nil {
		return nil, err
	}
	rp.BaseOffset = res.baseOffset
	rp.LogAppendTime = res.logAppendTime
	rp.LogStartOffset = res.logStartOffset
	if acks == -1 && p.hw.Load() <= res.lastOffset {
		return &produceWait{p: p, last: res.lastOffset, epoch: epoch}, nil
	}
	return nil, nil
}

// resolveTopic finds a request's topic by name (byID false) or id. exists
// reports that the metadata has it; err is the error every partition of a
// topic that cannot be served carries.
func (n *Node) resolveTopic(byID bool, name string, id [16]byte) (string, bool, error) {
	var exists bool
	n.view(func(st *metadata.State) {
		if byID {
			var t metadata.TopicInfo
			if t, exists = st.TopicByID(uuid.UUID(id)); exists {
				name = t.Name
			}
			return
		}
		_, exists = st.TopicByName(name)
	})
	switch {
	case exists:
		return name, true, nil
	case byID:
		return "", false, kerr.UnknownTopicID
	case !legalTopicName(name):
		return name, false, kerr.InvalidTopicException
	}
	return name, false, kerr.UnknownTopicOrPartition
}

// missingPartitionErr is the error for a partition this broker does not
// host: NOT_LEADER_OR_FOLLOWER if the partition exists (another broker
// leads it, or the log is being opened), else UNKNOWN_TOPIC_OR_PARTITION.
func (n *Node) missingPartitionErr(topic string, topicExists bool, partition int32) error {
	if !topicExists {
		return kerr.UnknownTopicOrPartition
	}
	found := false
	n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(topic); ok {
			_, found = st.Partition(t.ID, partition)
		}
	})
	if found {
		return kerr.NotLeaderForPartition
	}
	return kerr.UnknownTopicOrPartition
}

// legalTopicName is Kafka's rule: 1-249 of [a-zA-Z0-9._-], not "." or "..".
func legalTopicName(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for _, c := range []byte(s) {
		ok := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}
