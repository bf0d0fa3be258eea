package controller

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/controller/raftlog"
	"github.com/strata-io/strata/internal/netbuf"
)

// Options are what [Open] builds a [Controller] from. Only Config is
// required; the rest replace production parts in tests.
type Options struct {
	Config Config
	// Storage is the Raft log; nil opens controller/raftlog in
	// Config.WALDir() (fsynced). The Controller closes storage it opened
	// itself, never one passed in.
	Storage Storage
	// Listener is the bound CONTROLLER listener; nil listens on
	// Config.ListenAddr. The Controller closes it.
	Listener net.Listener
	// Transport carries Raft messages; nil uses the TCP transport on the
	// CONTROLLER listener. The Controller stops it either way.
	Transport Transport
	// Resolve maps a voter id to the address of its CONTROLLER listener,
	// for forwarding requests to the leader; nil uses Config.Voters.
	Resolve func(id int32) string
	// Registry receives the metrics; nil registers nowhere.
	Registry prometheus.Registerer
	// Seed seeds topic ids and placement; 0 seeds randomly.
	Seed uint64
	// ClusterID is this node's cluster id as its meta.properties records
	// it, "" if it has none yet. Leading an image that has no cluster id,
	// this controller records it (a fresh one when ""), so a cluster
	// created before the id was a metadata record keeps its first node's.
	ClusterID string
	// Bootstrap are records the first leader of a new cluster commits
	// with its cluster id (in the start-of-term entry, before any
	// decision), as KRaft commits bootstrap.checkpoint: the SCRAM
	// credentials of `strata format --add-scram`, so a cluster with an
	// authorizer can get its first user without the API. Ignored once
	// the image has a cluster id.
	Bootstrap []metadata.Record
	// RequestMemory bounds the bytes of RPC frames being read or handled
	// on the CONTROLLER listener; the broker passes a budget of
	// queued.max.request.bytes (apart from its Kafka listeners', so a
	// Kafka client cannot delay the quorum). Raft streams from voters are
	// not charged to it: a stranger holding the budget must not delay the
	// heartbeats that keep the leader. Nil: DefaultRequestMemory.
	RequestMemory *netbuf.Budget
	// Incarnation identifies this node's data directory (meta.properties'
	// incarnation.id); sent in the Raft hello. A second connection claiming
	// a voter's id with another incarnation while the first is open is
	// refused.
	Incarnation uuid.UUID
	// LocalAddr, if set, is the address the Raft transport and the
	// forwarding to the leader dial from: the node's own IP, so a
	// fault-injecting proxy between nodes on loopback tells them apart.
	LocalAddr net.Addr
	// Dial, if set, opens the Raft transport's and the forwarding
	// clients' connections (see [ClientOptions]).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// SASL, if set, makes every connection to the listener authenticate
	// first (sasl.go); the node's own dialers (Dial) must then do so too
	// (see [SASLDialer]).
	SASL *SASLServer
}

// DefaultRequestMemory is the request budget of a Controller whose
// Options carry none: the broker's queued.max.request.bytes default.
const DefaultRequestMemory = 256 << 20

// Controller is one member of the metadata quorum: a Raft node whose
// replicated state machine is the metadata image, and the service brokers
// call to read and change metadata. Decisions (placement, elections,
// fencing, config validation) are made on the leader by the pure Plan*
// functions of controller/metadata, one at a time, and proposed; a call
// reaching a follower is forwarded to the leader.
//
// All methods are safe for concurrent use.
type Controller struct {
	cfg       Config
	node      *node
	fsm       *metadataFSM
	storage   Storage
	ownsStore bool
	transport Transport
	ln        net.Listener
	srv       *server
	metrics   *metrics
	resolve   func(id int32) string
	localAddr net.Addr                                                          // Options.LocalAddr: forwarding clients dial from it
	dial      func(ctx context.Context, network, addr string) (net.Conn, error) // Options.Dial
	sasl      *SASLServer                                                       // Options.SASL
	live      *liveness
	// liveWake wakes the liveness loop when leadership changes, so a new
	// leader's broker sessions start as soon as it is ready.
	liveWake chan struct{}
	reqMem   *netbuf.Budget // bytes of inbound frames being read or handled

	// decisions feeds the decider goroutine, the only one that plans: a
	// plan always sees the effects of every decision before it. rng is
	// used by the decider only.
	decisions   chan *decision
	deciderDone chan struct{}
	rng         *rand.Rand
	// startedTerm is the Raft term whose start-of-term records
	// (startOfTerm) are committed; written by the decider only.
	startedTerm atomic.Uint64
	// clusterIDCandidate is the id this controller records as leader of
	// an image without one: Options.ClusterID, or a fresh one.
	clusterIDCandidate string
	// bootstrap is Options.Bootstrap.
	bootstrap []metadata.Record

	// fwdMu guards fwd, the clients used to forward to the leader.
	fwdMu sync.Mutex
	fwd   map[string]*Client

	stopc     chan struct{}
	stopCtx   context.Context // cancelled by Close, for work of our own
	stopAll   context.CancelFunc
	wg        sync.WaitGroup // the liveness loop and the listener's goroutines
	closeOnce sync.Once
	closeErr  error
}

// Open starts a controller: it opens (or creates and bootstraps) the Raft
// log, restores the metadata image from the latest snapshot, replays the
// log, and starts the Ready loop, the transport, the CONTROLLER listener
// and the broker-liveness loop. Close stops them all.
func Open(o Options) (*Controller, error) {
	cfg := o.Config
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:      cfg,
		fsm:      newMetadataFSM(cfg.Logger, metadata.Defaults{MinInsyncReplicas: cfg.MinInsyncReplicas, UncleanLeaderElection: cfg.UncleanLeaderElection}),
		storage:  o.Storage,
		resolve:  o.Resolve,
		fwd:      map[string]*Client{},
		stopc:    make(chan struct{}),
		live:     newLiveness(cfg.BrokerSessionTimeout),
		liveWake: make(chan struct{}, 1),
		reqMem:   o.RequestMemory,

		decisions:   make(chan *decision, decisionQueueLen),
		deciderDone: make(chan struct{}),
	}
	c.stopCtx, c.stopAll = context.WithCancel(context.Background())
	if c.reqMem == nil {
		c.reqMem = netbuf.NewBudget(DefaultRequestMemory)
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	c.rng = rand.New(rand.NewPCG(seed, seed+1))
	c.clusterIDCandidate = o.ClusterID
	c.bootstrap = o.Bootstrap
	if c.clusterIDCandidate == "" {
		c.clusterIDCandidate = newClusterID(c.rng)
	}
	if c.resolve == nil {
		c.resolve = func(id int32) string {
			v, _ := cfg.voter(id)
			return v.Addr
		}
	}
	fail := func(err error) (*Controller, error) {
		if c.ln != nil {
			c.ln.Close()
		}
		if c.transport != nil {
			c.transport.Stop()
		}
		if c.ownsStore {
			c.storage.(*raftlog.Storage).Close()
		}
		return nil, err
	}
	if c.storage == nil {
		st, err := raftlog.Open(raftlog.Options{FS: cfg.FS, Dir: cfg.WALDir(), Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("controller: open raft log: %w", err)
		}
		c.storage, c.ownsStore = st, true
	}
	c.ln = o.Listener
	if c.ln == nil {
		ln, err := net.Listen("tcp", cfg.ListenAddr)
		if err != nil {
			return fail(fmt.Errorf("controller: listen %s: %w", cfg.ListenAddr, err))
		}
		c.ln = ln
	}
	c.localAddr = o.LocalAddr
	c.dial = o.Dial
	c.sasl = o.SASL
	var tcp *TCPTransport
	c.transport = o.Transport
	if c.transport == nil {
		peers := map[uint64]string{}
		for _, v := range cfg.Voters {
			if v.ID != cfg.NodeID {
				peers[uint64(v.ID)] = v.Addr
			}
		}
		// The cluster id peers must agree on: the quorum's, as this node's
		// applied image holds it (metadata.ClusterIDRecord). Until the first
		// leader has recorded it, "" (hellos then carry none and are not
		// checked), so a fresh node can join and learn it. Options.ClusterID
		// is only this node's candidate: a node upgraded from a version that
		// made up its own id must not be refused for it.
		clusterID := c.ClusterID
		tcp = NewTCPTransport(TCPTransportOptions{ID: uint64(cfg.NodeID), Peers: peers, Logger: cfg.Logger,
			ClusterID: clusterID, Incarnation: o.Incarnation, LocalAddr: o.LocalAddr, Dial: o.Dial})
		c.transport = tcp
	}
	m := newMetrics(cfg.NodeID, c.Status, func() (n int) {
		if c.node == nil || !c.node.isLeaderReady() {
			return 0 // the active controller's alone, as offline partitions
		}
		c.fsm.read(func(st *metadata.State) { n = st.PreferredReplicaImbalance() })
		return n
	})
	c.metrics = m
	var err error
	c.node, err = newNode(nodeConfig{
		id:              uint64(cfg.NodeID),
		peers:           cfg.voterIDs(),
		storage:         c.storage,
		fsm:             c.fsm,
		transport:       c.transport,
		tick:            cfg.TickInterval,
		electionTicks:   cfg.ElectionTicks,
		heartbeatTicks:  cfg.HeartbeatTicks,
		snapshotEntries: cfg.SnapshotEntries,
		catchUpEntries:  cfg.SnapshotCatchUpEntries,
		maxSizePerMsg:   cfg.MaxSizePerMsg,
		maxInflight:     cfg.MaxInflightMsgs,
		logger:          cfg.Logger.With("node", cfg.NodeID),
		metrics:         m,
		onLeader: func(lead, term uint64) {
			c.live.reset()
			select {
			case c.liveWake <- struct{}{}:
			default: // a wake is pending
			}
			if lead == uint64(cfg.NodeID) {
				// Every broker gets a fresh session once this leader is
				// ready (liveness): a broker lost with the old leader is
				// fenced a session timeout after that, not after its last
				// heartbeat.
				cfg.Logger.Info("controller: elected quorum leader; broker sessions start afresh", "node", cfg.NodeID, "term", term)
			}
		},
	})
	if err != nil {
		return fail(err)
	}
	if err := m.register(o.Registry); err != nil {
		return fail(err)
	}
	c.srv = newServer(c, tcp)
	if err := c.node.start(); err != nil {
		return fail(err)
	}
	c.wg.Add(3)
	if cfg.AutoLeaderRebalance {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.rebalanceLoop() }()
	}
	go func() { defer c.wg.Done(); c.srv.serve(c.ln) }()
	go func() { defer c.wg.Done(); c.livenessLoop() }()
	go func() { defer c.wg.Done(); c.decider() }()
	if len(cfg.Voters) == 1 {
		// A quorum of one need not wait an election timeout.
		c.node.campaign()
	}
	return c, nil
}

// Close stops the controller: the listener and its connections, the
// liveness loop, the Ready loop, the transport, and the storage it opened.
// Calls in flight fail with [ErrStopped]. Idempotent.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		close(c.stopc)
		c.stopAll()
		c.ln.Close()
		c.srv.closeConns()
		c.node.Stop()
		c.transport.Stop()
		c.wg.Wait()
		c.srv.wait()
		c.fwdMu.Lock()
		for _, cl := range c.fwd {
			cl.Close()
		}
		c.fwd = nil
		c.fwdMu.Unlock()
		if c.ownsStore {
			c.closeErr = c.storage.(*raftlog.Storage).Close()
		}
	})
	return c.closeErr
}

// ClusterID returns the quorum's cluster id as this node's applied image
// holds it (metadata.ClusterIDRecord), or "" before the first leader has
// recorded one (a new cluster's first moments) or before this node has
// applied it. Every node of the cluster reports the same id; a peer whose
// messages carry another belongs to another cluster.
func (c *Controller) ClusterID() string {
	var id string
	c.fsm.read(func(s *metadata.State) { id = s.ClusterID() })
	return id
}

// newClusterID draws a cluster id as Kafka generates one: a random
// (version 4) UUID in URL-safe base64 without padding, 22 characters.
func newClusterID(rng *rand.Rand) string {
	var id uuid.UUID
	for i := 0; i < 16; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Addr is the bound address of the CONTROLLER listener.
func (c *Controller) Addr() string { return c.ln.Addr().String() }

// ID is node.id.
func (c *Controller) ID() int32 { return c.cfg.NodeID }

// Status returns the Raft state: term, leader, commit and applied index,
// snapshot index and time.
func (c *Controller) Status() Status { return c.node.status() }

// Leader returns the known leader's id and CONTROLLER address; ok is false
// when no leader is known.
func (c *Controller) Leader() (id int32, addr string, ok bool) {
	l := c.node.leader.Load()
	if l == 0 {
		return -1, "", false
	}
	return int32(l), c.resolve(int32(l)), true
}

// IsLeader reports whether this controller leads and has caught up with
// everything committed before its term.
func (c *Controller) IsLeader() bool { return c.node.isLeaderReady() }

// State returns a copy of the metadata image as applied on this node.
func (c *Controller) State() *metadata.State {
	var st *metadata.State
	c.fsm.read(func(s *metadata.State) { st = s.Clone() })
	return st
}

// Propose replicates records as one entry and waits until this node has
// applied it; it returns the entry's metadata offset (its Raft index). It is the
// raw path under the service methods (and the benchmark's): it makes no
// decision, so records must be consistent with the state when applied or
// they are skipped. On a follower it fails with a [NotControllerError].
func (c *Controller) Propose(ctx context.Context, recs []metadata.Record) (int64, error) {
	if len(recs) == 0 {
		return c.fsmOffset(), nil
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	idx, err := c.node.Propose(ctx, metadata.EncodeBatch(recs))
	if err != nil {
		return 0, c.proposeErr(err)
	}
	return int64(idx), nil
}

func (c *Controller) fsmOffset() int64 {
	var off int64
	c.fsm.read(func(s *metadata.State) { off = s.Offset() })
	return off
}

func (c *Controller) proposeErr(err error) error {
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrProposalDropped):
		return c.notController()
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("controller: proposal: %w (%w)", kerr.RequestTimedOut, err)
	}
	return err
}

func (c *Controller) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.ProposalTimeout)
}

// NotControllerError is returned when a request reached a controller that
// is not the leader and was not (or could not be) forwarded. It unwraps to
// kerr.NotController; LeaderID is -1 when no leader is known.
type NotControllerError struct {
	LeaderID   int32
	LeaderAddr string
}

func (e *NotControllerError) Error() string {
	if e.LeaderID < 0 {
		return "controller: NOT_CONTROLLER: no leader known"
	}
	return fmt.Sprintf("controller: NOT_CONTROLLER: leader is %d at %s", e.LeaderID, e.LeaderAddr)
}

// Unwrap returns kerr.NotController.
func (e *NotControllerError) Unwrap() error { return kerr.NotController }

func (c *Controller) notController() error {
	id, addr, ok := c.Leader()
	if !ok || id == c.cfg.NodeID {
		return &NotControllerError{LeaderID: -1}
	}
	return &NotControllerError{LeaderID: id, LeaderAddr: addr}
}

// route runs local on the leader, or remote against the leader's
// CONTROLLER listener on a follower. A request that was itself forwarded
// is never forwarded again (no loops): it gets NOT_CONTROLLER. While no
// leader is known it waits, a tick at a time, until ctx expires.
func (c *Controller) route(ctx context.Context, forwarded bool, local func(context.Context) error, remote func(context.Context, *Client) error) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	for {
		select {
		case <-c.stopc:
			return ErrStopped
		default:
		}
		if err := c.node.failed(); err != nil {
			// This node's log failed and it stopped taking part: another
			// controller must answer.
			c.cfg.Logger.Debug("controller: refusing request, raft node failed", "err", err)
			return &NotControllerError{LeaderID: -1}
		}
		if c.node.isLeaderReady() {
			err := local(ctx)
			if errors.Is(err, errNotReady) {
				err = c.notController()
			}
			return err
		}
		lead := int32(c.node.leader.Load())
		if lead != 0 && lead != c.cfg.NodeID {
			if forwarded {
				return c.notController()
			}
			cl := c.forwarder(c.resolve(lead))
			err := remote(ctx, cl)
			var nc *NotControllerError
			if err == nil || !(isNetErr(err) || errors.As(err, &nc)) {
				return err
			}
			// The leader moved or is unreachable: wait and re-resolve.
		}
		t := time.NewTimer(c.cfg.TickInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.notController()
		case <-c.stopc:
			t.Stop()
			return ErrStopped
		case <-t.C:
		}
	}
}

var errNotReady = errors.New("controller: leader not ready")

// decision is one request's plan waiting for the decider.
type decision struct {
	ctx  context.Context
	plan func(st *metadata.State) []metadata.Record
	done chan struct{}
	off  int64
	err  error
}

const (
	decisionQueueLen = 1024
	// maxDecisionBatch bounds how many queued decisions share one entry.
	maxDecisionBatch = 128
)

// decideAndPropose has the decider run plan on the current image (as
// extended by the decisions ahead of it) and waits until the records it
// returned are applied. plan runs on the decider goroutine and must not
// keep st; whatever it writes is safe to read once this returns.
func (c *Controller) decideAndPropose(ctx context.Context, plan func(st *metadata.State) []metadata.Record) (int64, error) {
	d := &decision{ctx: ctx, plan: plan, done: make(chan struct{})}
	select {
	case c.decisions <- d:
	case <-ctx.Done():
		return 0, c.proposeErr(ctx.Err())
	case <-c.deciderDone:
		return 0, ErrStopped
	}
	// Wait even if ctx expires: the plan may still be writing the caller's
	// results. The decider's own proposal timeout bounds the wait.
	select {
	case <-d.done:
		return d.off, d.err
	case <-c.deciderDone:
		select {
		case <-d.done:
			return d.off, d.err
		default:
			return 0, ErrStopped
		}
	}
}

// decider is the one goroutine that plans. It takes every decision already
// queued (up to maxDecisionBatch), plans them one after another — each on
// a speculative copy of the image that includes the records planned before
// it — and proposes all their records as one entry, answering them all
// once it is applied. While one batch commits, the next one queues, so
// decisions are group-committed like raft entries are. It runs until Close.
func (c *Controller) decider() {
	defer close(c.deciderDone)
	for {
		var batch []*decision
		select {
		case d := <-c.decisions:
			batch = append(batch, d)
		case <-c.stopc:
			return
		}
	fill:
		for len(batch) < maxDecisionBatch {
			select {
			case d := <-c.decisions:
				batch = append(batch, d)
			default:
				break fill
			}
		}
		c.decideBatch(batch)
	}
}

func (c *Controller) decideBatch(batch []*decision) {
	finish := func(ds []*decision, off int64, err error) {
		for _, d := range ds {
			d.off, d.err = off, err
			close(d.done)
		}
	}
	if !c.node.isLeaderReady() {
		finish(batch, 0, errNotReady)
		return
	}
	term := c.node.term.Load()
	var recs []metadata.Record
	var live []*decision
	c.fsm.read(func(st *metadata.State) {
		var spec *metadata.State // the image plus this batch so far
		if c.startedTerm.Load() != term {
			if recs = c.startOfTerm(st); len(recs) > 0 {
				spec = st.Clone()
				if err := spec.ApplyBatch(spec.Offset()+1, recs); err != nil {
					c.cfg.Logger.Warn("controller: start-of-term records refused by the speculative image", "err", err)
				}
			}
		}
		for i, d := range batch {
			if err := d.ctx.Err(); err != nil {
				finish([]*decision{d}, 0, c.proposeErr(err))
				continue
			}
			cur := st
			if spec != nil {
				cur = spec
			}
			r := d.plan(cur)
			live = append(live, d)
			if len(r) == 0 {
				continue
			}
			recs = append(recs, r...)
			if i < len(batch)-1 {
				if spec == nil {
					spec = st.Clone()
				}
				// The offset is a placeholder: the entry's index is known
				// only once it is appended. Plans do not depend on it.
				if err := spec.ApplyBatch(spec.Offset()+1, r); err != nil {
					c.cfg.Logger.Warn("controller: planned records refused by the speculative image", "err", err)
				}
			}
		}
	})
	if len(recs) == 0 {
		c.startedTerm.Store(term)
		finish(live, c.fsmOffset(), nil)
		return
	}
	ctx, cancel := context.WithTimeout(c.stopCtx, c.cfg.ProposalTimeout)
	defer cancel()
	off, err := c.Propose(ctx, recs)
	if err == nil {
		c.startedTerm.Store(term)
		for _, r := range recs {
			if metadata.IsUncleanElection(r) {
				c.metrics.uncleanElections.Inc()
			}
		}
	}
	// Every decision in the batch was planned on state that includes the
	// records before it, so all of them wait for the whole entry.
	finish(live, off, err)
}

// startOfTerm plans what a new leader commits before (in the same entry
// as) its first decision: the cluster id if the image has none yet
// (metadata.State.PlanClusterID, the first leader of a new cluster, or of
// an image from a version without the record), so every decision —
// registrations first — sees it, with Options.Bootstrap for a new
// cluster; and, on an image without the
// strata.replication.version feature (metadata.State.PlanReplicationFeature:
// written before replication, when every replica was listed as in sync),
// ISRs corrected to the leader alone and the feature recorded, so the
// correction never runs again. Planned once per term, so a leader does
// not walk every partition for each batch; the liveness loop makes sure
// it runs even while no request comes.
func (c *Controller) startOfTerm(st *metadata.State) []metadata.Record {
	recs, err := st.PlanClusterID(c.clusterIDCandidate)
	if err != nil {
		// meta.properties holds an id the record cannot carry: record a
		// fresh one; this node's registration will then say the mismatch.
		c.cfg.Logger.Warn("controller: meta.properties cluster id unusable, recording a fresh one", "err", err)
		c.clusterIDCandidate = newClusterID(c.rng)
		recs, _ = st.PlanClusterID(c.clusterIDCandidate)
	}
	if len(recs) > 0 && st.ClusterID() == "" && len(st.Brokers()) == 0 && len(st.Topics()) == 0 {
		// A new cluster (not an image of a version without the cluster
		// id record): its bootstrap records go in the same entry.
		recs = append(recs, c.bootstrap...)
	}
	return append(recs, st.PlanReplicationFeature()...)
}

// startTerm has the decider plan the start-of-term records, if this
// leader's term has not had them yet, with nothing else.
func (c *Controller) startTerm() {
	if c.startedTerm.Load() == c.node.term.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(c.stopCtx, c.cfg.ProposalTimeout)
	defer cancel()
	if _, err := c.decideAndPropose(ctx, func(*metadata.State) []metadata.Record { return nil }); err != nil {
		c.cfg.Logger.Warn("controller: start-of-term records failed", "err", err)
	}
}

func (c *Controller) forwarder(addr string) *Client {
	c.fwdMu.Lock()
	defer c.fwdMu.Unlock()
	cl := c.fwd[addr]
	if cl == nil {
		cl = NewClient(ClientOptions{Addrs: []string{addr}, LocalAddr: c.localAddr, Dial: c.dial, ClusterID: c.ClusterID, forwarding: true})
		if c.fwd != nil {
			c.fwd[addr] = cl
		}
	}
	return cl
}

// decideRouted is the shape of every metadata-changing request: on the
// leader, plan it against the current image (through the one decider, so no
// two plans race on stale state), propose the planned records and, once they
// are applied and the plan did not fail, run onApplied (if any); on a
// follower, forward the request to the leader with remote. newStep gives
// the planner, a fresh one per request: its steps run as consecutive
// decisions, each proposed and applied before the next is planned, until
// one reports done (most planners are a single step). It returns the last
// step's result.
func decideRouted[R any](ctx context.Context, c *Controller, fwd bool, newStep func() func(st *metadata.State) ([]metadata.Record, R, bool, error), onApplied func(), remote func(ctx context.Context, cl *Client) (R, error)) (R, error) {
	var res R
	err := c.route(ctx, fwd, func(ctx context.Context) error {
		step := newStep()
		for {
			var perr error
			var done bool
			_, err := c.decideAndPropose(ctx, func(st *metadata.State) []metadata.Record {
				var recs []metadata.Record
				recs, res, done, perr = step(st)
				return recs
			})
			if err == nil {
				err = perr
			}
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
		if onApplied != nil {
			onApplied()
		}
		return nil
	}, func(ctx context.Context, cl *Client) error {
		var err error
		res, err = remote(ctx, cl)
		return err
	})
	return res, err
}
