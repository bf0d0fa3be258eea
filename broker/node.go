package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/quota"
	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/netbuf"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

// Options are what [Open] builds a [Node] from. Only Config is required.
type Options struct {
	Config Config
	// Logger, nil means slog.Default().
	Logger *slog.Logger
	// Registry receives the node's metrics (broker, storage, controller,
	// Go runtime, process); nil: the node makes its own registry. /metrics
	// serves it when it is also a prometheus.Gatherer.
	Registry prometheus.Registerer
	// AdminListener, if set, serves the admin HTTP endpoints instead of
	// binding admin.listener (tests use it to probe /readyz during Open).
	AdminListener net.Listener
	// StartTimeout bounds Open's wait for the controller to accept this
	// broker (0 = 30s).
	StartTimeout time.Duration
	// FileLimit, if set, is the open-file limit the partition budget is
	// planned from, instead of raising and reading RLIMIT_NOFILE (tests).
	FileLimit uint64
	// FS is the file system of log.dirs and metadata.log.dir (their
	// logs, checkpoints, meta.properties, producer ids); nil is
	// vfs.Default. Tests pass a vfs.MemFS to crash a node's page cache
	// (MemFS.CrashClone). The controller's Raft log and the tier's
	// filesystem object store and remote cache stay on the OS.
	FS vfs.FS
}

// Node is one Strata process: a broker, and in combined mode the
// controller too. It serves Kafka clients on its PLAINTEXT listeners from
// the partitions the controller's metadata says it leads.
//
// All methods are safe for concurrent use.
type Node struct {
	cfg      Config
	logger   *slog.Logger
	fds      fdBudget        // the open-file budget (fdbudget.go)
	ctx      context.Context // cancelled by Close once connections drained: loops stop
	cancel   context.CancelFunc
	stopping chan struct{} // closed when Close starts: long polls answer at once
	// clusterID is the quorum's cluster id once the registration has
	// confirmed it (see ClusterID); props is meta.properties as read at
	// start (its incarnation is kept there, so a restart on the same data
	// directory re-registers as the same incarnation and is accepted at
	// once; another process claiming this node.id from another directory
	// is still refused, DUPLICATE_BROKER_REGISTRATION).
	clusterID   atomic.Pointer[string]
	props       metaProperties
	incarnation uuid.UUID

	fs     vfs.FS // Options.FS: every data-dir file goes through it
	store  *storage.Manager
	remote objstore.ObjectStore // nil unless remote.log.storage.system.enable (tiering_store.go)
	tier   *tier                // uploader and reader over remote; nil without it (tiering.go)
	pids   *producerIDs
	ctl    *controller.Controller // nil when this node is broker-only
	svc    controller.Service

	lns     []net.Listener // client listeners, in Config order
	lnNames []string
	// tlsSrcs are the SSL listeners' key material by listener name;
	// interTLS, the inter-broker listener's when it is SSL: the inter-broker
	// clients (replica fetchers, marker sender, verification) dial with it.
	tlsSrcs  map[string]*tlsSource
	interTLS *tlsSource
	ctlTLS   *tlsSource // the controller listener's, when it is SSL
	// saslLns are the SASL_* listeners' mechanisms by listener name
	// (sasl_conn.go).
	saslLns    map[string]*saslListener
	advertised []metadata.Listener
	ctlAddr    string

	connMu sync.Mutex // guards conns
	conns  map[*conn]struct{}
	// reqMem bounds the bytes of requests being read or handled on every
	// client connection together (queued.max.request.bytes). The
	// CONTROLLER listener has a budget of its own of the same size, as
	// Kafka's controller has its own socket server and memory pool: a
	// Kafka client holding this one must not delay the quorum's traffic.
	reqMem *netbuf.Budget

	metaMu     sync.RWMutex // guards meta, metaNotify, topicCfgs
	meta       *metadata.State
	metaNotify chan struct{} // closed and replaced after each applied delta
	reconciled int64         // the metadata offset the hosted partitions match
	topicCfgs  map[string]map[string]string
	// watchMu guards rewatch: cancels the metadata follower's current
	// watch (it watches again from its applied offset + 1).
	watchMu sync.Mutex
	rewatch context.CancelFunc
	// metaLag is the heartbeat loop's own: is the view behind the
	// controller leader's offset for too long?
	metaLag metadataLag

	partsMu sync.RWMutex // guards parts
	parts   map[tpKey]*partition
	// reconcileMu serialises reconcile (the metadata follower) and
	// removeStrayLogs (Open), so a log judged stray is never one that
	// reconcile is opening.
	reconcileMu sync.Mutex

	fetchSessions *fetchSessionCache // KIP-227 sessions (fetch_session.go)
	replicas      *replicaFetchers   // the follower side: fetchers of the partitions followed here (replica_fetcher.go)
	// leaderQuota and followerQuota are the replication throttles
	// (replica_throttle.go); rates set by reconcile.
	leaderQuota, followerQuota *replicationQuota
	groups                     *groupCoordinator // consumer groups and committed offsets (coordinator.go)
	txns                       *txnCoordinator   // the transaction coordinator (txn_coordinator.go)
	shares                     *shareCoordinator // the share coordinator of __share_group_state (share_coordinator.go)
	// Share groups, the share-partition leader's side (share_leader.go,
	// share_session.go); sharePersister reaches the share coordinator.
	shareSessions  *shareSessionCache
	shareLeader    *shareLeader
	sharePersister share.Persister

	pcells producerCells // each open log's idempotent-producer state (idempotence.go)
	// produceHook, if set (tests), runs after a produce request's appends;
	// an error closes the connection instead of answering.
	produceHook atomic.Pointer[produceHookFunc]
	// txnVerifyHook, if set (tests), answers KIP-890 verification in place
	// of verifyTxnPartitions (txn_produce.go).
	txnVerifyHook atomic.Pointer[txnVerifyFunc]
	// deltaHook, if set (tests), runs before each metadata delta is
	// applied (it may hold the delta back).
	deltaHook atomic.Pointer[func(controller.Delta)]

	brokerEpoch atomic.Int64
	fenced      atomic.Bool
	// presumedFencedSince is when presumedFenced first held since the last
	// answered heartbeat (unix nanos), 0 while it does not: it logs the
	// change once each way.
	presumedFencedSince atomic.Int64

	metrics  *metrics              // admin.go, metrics.go
	reg      prometheus.Registerer // the node's registry: broker, storage, controller metrics
	gatherer prometheus.Gatherer   // what /metrics serves
	health   nodeHealth            // what /readyz judges
	admin    *adminServer          // nil when admin.listener is empty
	// adminTLS is the admin listener's key material, when it is SSL.
	adminTLS *tlsSource

	metaLock  io.Closer      // metadata.log.dir's .lock when it is not one of log.dirs
	loops     sync.WaitGroup // accept loops, metadata follower, heartbeats
	connWG    sync.WaitGroup // connections
	closeOnce sync.Once
	closeErr  error

	// authz is the authorizer over the image's ACLs, nil without
	// authorizer.class.name; replaced under metaMu with the image
	// (authorize.go), so a handler woken by metaNotify sees its ACLs.
	authz atomic.Pointer[authz.Authorizer]
	// quotas are the client quotas' rates; quotaTab the image's quotas,
	// replaced under metaMu with the image (quotas.go).
	quotas *quota.Manager
	// connCounts are the client connections by address, against
	// max.connections and max.connections.per.ip (conn_quotas.go).
	connCounts *connCounts
	quotaTab   atomic.Pointer[quotaTable]
}

type tpKey struct {
	topic     string
	partition int32
}

// Open starts a node: the storage manager on log.dirs, the client
// listeners, the controller (combined mode) or a client of the quorum, the
// metadata follower, the broker registration and heartbeats. It returns
// once the controller has unfenced this broker, with every listener
// accepting. Close stops everything.
func Open(o Options) (_ *Node, err error) {
	cfg := o.Config
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if cfg.QueuedMaxRequests <= 0 || cfg.SocketRequestMaxBytes <= 0 || cfg.ConnectionsMaxIdle <= 0 || cfg.RequestReadTimeout <= 0 {
		return nil, fmt.Errorf("%w: connection limits unset (build Config with ParseConfig or DefaultConfig)", ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// n is a local, not the named result: the goroutines started below
	// capture it, and a failed start's "return nil, err" must not write
	// what they read (a data race the race detector caught).
	n := &Node{
		cfg: cfg, logger: o.Logger, ctx: ctx, cancel: cancel, stopping: make(chan struct{}),
		conns: map[*conn]struct{}{}, meta: metadata.NewState(), metaNotify: make(chan struct{}),
		topicCfgs: map[string]map[string]string{}, parts: map[tpKey]*partition{}, reconciled: -1,
		fetchSessions: newFetchSessionCache(cfg.FetchSessionCacheSlots),
		reqMem:        netbuf.NewBudget(cfg.QueuedMaxRequestBytes),
		leaderQuota:   newReplicationQuota(), followerQuota: newReplicationQuota(),
	}
	n.refreshAuthorizer(controller.Delta{Image: n.meta})
	n.connCounts = newConnCounts(cfg.ConnLimits)
	n.quotas = quota.NewManager(quota.Config{Samples: cfg.QuotaWindowNum, Window: cfg.QuotaWindowSize})
	n.refreshQuotas(controller.Delta{Image: n.meta})
	n.fs = o.FS
	if n.fs == nil {
		n.fs = vfs.Default
	}
	n.fenced.Store(true)
	// Key material first: a key store that does not load is a
	// configuration error, found before anything opens.
	if err := n.openTLS(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := n.startMetrics(o); err != nil {
		return nil, err
	}
	if err := n.openSASL(); err != nil {
		return nil, err
	}
	if err := n.lockMetadataDir(); err != nil {
		return nil, err
	}
	// The storage manager locks every log dir before anything reads or
	// writes in them (meta.properties and the producer ids included).
	n.planFileBudget(o.FileLimit)
	loadStart := time.Now()
	n.store, err = storage.OpenManager(storage.ManagerOptions{
		MaxOpenSealedSegments: n.fds.plan.SealedSegments,
		Dir:                   cfg.LogDir, Dirs: cfg.LogDirs, MinFreeBytes: cfg.LogDirMinFreeBytes, Default: cfg.Storage, Logger: o.Logger,
		RetentionCheckInterval: cfg.RetentionCheckInterval, FlushCheckInterval: cfg.FlushCheckInterval,
		CheckpointInterval: cfg.CheckpointInterval, RecoveryThreads: cfg.RecoveryThreads,
		HighWatermarkCheckpointInterval: cfg.HighWatermarkCheckpointInterval,
		ProducerSnapshot:                n.pcells.hook,
		DisableCleaner:                  !cfg.CleanerEnable, CleanerThreads: cfg.CleanerThreads,
		CleanerIOMaxBytesPerSecond: cfg.CleanerIOMaxBytesPerSecond, CleanerDedupeBufferSize: cfg.CleanerDedupeBufferSize,
		CleanerBackoff: cfg.CleanerBackoff,
		FS:             n.fs,
	})
	if err != nil {
		return nil, err
	}
	if n.props, err = loadMetaProperties(n.fs, cfg.LogDir, cfg.NodeID); err != nil {
		return nil, err
	}
	n.incarnation = n.props.incarnation
	if n.pids, err = openProducerIDs(n.fs, cfg.LogDir, cfg.NodeID); err != nil {
		return nil, err
	}
	n.health.recovery.Store(summarizeRecovery(n.store.Logs(), time.Since(loadStart)))
	n.warnOverBudget(len(n.store.Logs()))
	n.health.storeLoaded.Store(true)
	if err := n.openRemoteStore(ctx); err != nil {
		return nil, err
	}

	for _, l := range cfg.ClientListeners() {
		ln, err := net.Listen("tcp", l.Addr())
		if err != nil {
			return nil, fmt.Errorf("broker: listeners: listen %s: %w", l, err)
		}
		n.lns = append(n.lns, ln)
		n.lnNames = append(n.lnNames, l.Name)
	}
	n.advertised = n.advertisedListeners()

	if cfg.hasRole(controller.RoleController) {
		if err := n.startController(o); err != nil {
			return nil, err
		}
	} else {
		addrs := make([]string, len(cfg.QuorumVoters))
		for i, v := range cfg.QuorumVoters {
			addrs[i] = v.Addr
		}
		n.svc = controller.NewClient(controller.ClientOptions{Addrs: addrs, LocalAddr: n.localAddr(), Dial: n.controllerDial(),
			WatchTimeout: n.cfg.QuorumRequestTimeout, ClusterID: n.helloClusterID(), Logger: n.logger})
	}

	if err := n.startTier(); err != nil { // before the follower: reconcile hands it partitions
		return nil, err
	}
	n.groups = newGroupCoordinator(n)                // before the follower: reconcile tells it of __consumer_offsets
	n.txns = newTxnCoordinator(n)                    // before the follower: reconcile tells it of __transaction_state
	n.shares = newShareCoordinator(n)                // before the follower: reconcile tells it of __share_group_state
	n.sharePersister = newShareStatePersister(n)     // the RPC persister to the share coordinators (share_persister.go)
	if err := n.startReplicaFetchers(); err != nil { // before the follower: reconcile hands it partitions
		return nil, err
	}
	// The session cache first: newShareLeader registers a collector that
	// reads n.shareSessions, and /metrics may be scraped from then on.
	n.shareSessions = newShareSessionCache(cfg.Share.MaxShareSessions)
	n.shareLeader = newShareLeader(n)
	n.loops.Add(1)
	go func() { defer n.loops.Done(); n.followMetadata() }()

	startCtx, startCancel := context.WithTimeout(ctx, o.StartTimeout)
	defer startCancel()
	if err := n.register(startCtx); err != nil {
		return nil, err
	}
	n.loops.Add(1)
	go func() { defer n.loops.Done(); n.heartbeatLoop() }()
	if err := n.waitUnfenced(startCtx); err != nil {
		return nil, err
	}
	// The controller has unfenced us; serve only once our own view says so
	// too, or a client connecting right away would find no broker in
	// Metadata.
	if !n.waitMetadata(startCtx, func(st *metadata.State) bool {
		b, ok := st.Broker(cfg.NodeID)
		return ok && !b.Fenced
	}) {
		return nil, fmt.Errorf("broker: waiting for the metadata view to show this broker unfenced: %w", startCtx.Err())
	}
	n.removeStrayLogs()
	n.tier.start()
	// Retention, flushes and the cleaner start only now that every hosted
	// log has its topic's configs: run with the broker defaults, retention
	// would delete what a topic keeps longer (retention.ms=-1, a tiered
	// topic's remote-uploaded data).
	n.store.Start()
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		select {
		case err := <-n.store.Failed():
			// Kafka stops a broker once its last log dir is offline (one
			// failed dir of several takes only its partitions; a full one
			// only refuses appends).
			n.logger.Error("broker: every data directory failed, stopping", "err", err)
			n.cancel()
		case <-n.ctx.Done():
		}
	}()
	for i, ln := range n.lns {
		n.loops.Add(1)
		go func() { defer n.loops.Done(); n.acceptLoop(ln, n.lnNames[i]) }()
	}
	n.loops.Add(1)
	go func() { defer n.loops.Done(); n.groups.run(n.ctx) }()
	n.loops.Add(1)
	go func() { defer n.loops.Done(); n.txns.run(n.ctx) }()
	n.loops.Add(1)
	go func() { defer n.loops.Done(); n.shareLeader.run(n.ctx) }()
	n.loops.Add(1)
	go func() { defer n.loops.Done(); n.shares.run(n.ctx) }()
	n.health.serving.Store(true)
	n.logger.Info("broker: started", "node.id", cfg.NodeID, "cluster.id", n.ClusterID(), "listeners", n.Addrs())
	return n, nil
}

// lockMetadataDir takes metadata.log.dir's .lock (Kafka locks it too)
// unless the directory is one of log.dirs, which the storage manager locks.
func (n *Node) lockMetadataDir() error {
	md := filepath.Clean(n.cfg.MetadataLogDir)
	for _, d := range n.cfg.LogDirs {
		if filepath.Clean(d) == md {
			return nil
		}
	}
	if err := n.fs.MkdirAll(md, 0o755); err != nil {
		return fmt.Errorf("broker: create metadata log dir: %w", err)
	}
	lk, err := n.fs.Lock(filepath.Join(md, storage.LockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return fmt.Errorf("broker: metadata log dir %s is in use by another process: %w", md, err)
	}
	if err != nil {
		return fmt.Errorf("broker: lock metadata log dir: %w", err)
	}
	n.metaLock = lk
	return nil
}

// startController binds the CONTROLLER listener and opens the controller.
// A quorum of one whose only voter is this node takes the bound address
// (so port 0 works in tests).
func (n *Node) startController(o Options) error {
	var addr string
	for _, l := range n.cfg.Listeners {
		if l.Name == n.cfg.ControllerListenerName {
			addr = l.Addr()
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("broker: listeners: listen %s://%s: %w", n.cfg.ControllerListenerName, addr, err)
	}
	voters := append([]controller.Voter(nil), n.cfg.QuorumVoters...)
	if len(voters) == 1 && voters[0].ID == n.cfg.NodeID {
		voters[0].Addr = ln.Addr().String()
	}
	if n.ctlTLS != nil {
		ln = tls.NewListener(ln, n.ctlTLS.serverConfig())
	} else if n.cfg.Authorizer != nil && n.cfg.ControllerSASL == nil {
		n.logger.Warn("broker: the authorizer is on but the CONTROLLER listener is PLAINTEXT: whoever reaches it can change metadata; map it to SSL with client certificates",
			"listener", n.cfg.ControllerListenerName)
	}
	bootstrap, err := readBootstrap(n.fs, n.cfg.MetadataLogDir) // bootstrap.go
	if err != nil {
		ln.Close()
		return err
	}
	n.ctl, err = controller.Open(controller.Options{
		Bootstrap:     bootstrap,
		Config:        n.cfg.controllerConfig(ln.Addr().String(), voters, n.logger),
		Listener:      ln,
		Registry:      n.reg,
		ClusterID:     n.props.clusterID,
		RequestMemory: netbuf.NewBudget(n.cfg.QueuedMaxRequestBytes),
		Incarnation:   n.incarnation,
		LocalAddr:     n.localAddr(),
		Dial:          n.controllerDial(),
		SASL:          n.controllerSASL(),
	})
	if err != nil {
		ln.Close()
		return err
	}
	n.svc = n.ctl
	n.ctlAddr = ln.Addr().String()
	return nil
}

// advertisedListeners returns what this broker registers: advertised.listeners
// if set, else the bound client listeners.
func (n *Node) advertisedListeners() []metadata.Listener {
	var out []metadata.Listener
	if len(n.cfg.AdvertisedListeners) > 0 {
		for _, l := range n.cfg.AdvertisedListeners {
			out = append(out, metadata.Listener{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: listenerProtocol(l)})
		}
		return out
	}
	for i, ln := range n.lns {
		a := ln.Addr().(*net.TCPAddr)
		host := a.IP.String()
		if a.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
		out = append(out, metadata.Listener{Name: n.lnNames[i], Host: host, Port: int32(a.Port), SecurityProtocol: n.protocolOf(n.lnNames[i])})
	}
	return out
}

// Addrs returns the bound address of every listener by name
// (PLAINTEXT, CONTROLLER).
func (n *Node) Addrs() map[string]string {
	out := map[string]string{}
	for i, ln := range n.lns {
		out[n.lnNames[i]] = ln.Addr().String()
	}
	if n.ctlAddr != "" {
		out[n.cfg.ControllerListenerName] = n.ctlAddr
	}
	if a := n.AdminAddr(); a != "" {
		out["ADMIN"] = a
	}
	return out
}

// Addr returns the bound address of the first client listener.
func (n *Node) Addr() string { return n.lns[0].Addr().String() }

// ClusterID returns the quorum's cluster id: the one the metadata log
// records, which the controller confirmed when this broker registered and
// which meta.properties keeps. "" before the first registration of a
// node that had none.
func (n *Node) ClusterID() string {
	if id := n.clusterID.Load(); id != nil {
		return *id
	}
	return ""
}

// Done is closed when the node stops serving: during Close (once
// in-flight requests are answered), or when the data directory fails (the
// caller should then Close and exit non-zero).
func (n *Node) Done() <-chan struct{} { return n.ctx.Done() }

// Close stops accepting, lets in-flight requests finish (up to
// strata.shutdown.timeout.ms, then closes connections), stops the
// heartbeats, the metadata follower and the controller, and closes the
// storage manager, which flushes every log and writes the clean-shutdown
// marker. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.controlledShutdown()
		n.health.serving.Store(false)
		close(n.stopping)
		for _, ln := range n.lns {
			ln.Close()
		}
		n.connMu.Lock()
		conns := make([]*conn, 0, len(n.conns))
		for c := range n.conns {
			conns = append(conns, c)
			c.shutdown()
		}
		n.connMu.Unlock()
		drained := make(chan struct{})
		go func() {
			for _, c := range conns {
				<-c.done
			}
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(n.cfg.ShutdownTimeout):
			n.logger.Warn("broker: shutdown timeout, closing connections with requests in flight")
		}
		n.cancel() // wakes long polls and stops the loops
		for _, c := range conns {
			c.kill(nil)
		}
		n.connWG.Wait()
		n.loops.Wait()
		if n.replicas != nil {
			n.replicas.close() // no follower appends once the logs close
		}
		if n.groups != nil {
			n.groups.close()
		}
		if n.txns != nil {
			n.txns.close()
		}
		if n.shares != nil {
			n.shares.close()
		}
		var errs []error
		errs = append(errs, n.tier.close())
		if n.ctl != nil {
			errs = append(errs, n.ctl.Close())
		} else if cl, ok := n.svc.(*controller.Client); ok {
			errs = append(errs, cl.Close())
		}
		if n.store != nil {
			errs = append(errs, n.store.Close())
		}
		if n.metaLock != nil {
			errs = append(errs, n.metaLock.Close())
		}
		errs = append(errs, n.admin.close())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// controlledShutdown, the first step of Close (controlled.shutdown.enable,
// KRaft's CONTROLLED_SHUTDOWN): while still serving, heartbeat with
// WantShutDown every broker.heartbeat.interval.ms until the controller
// answers ShouldShutDown (it has moved this broker's leaderships to other
// ISR members and taken it out of every ISR), for at most
// broker.session.timeout.ms: by then the controller would have fenced a
// silent broker anyway, with the same moves. A broker that is fenced, not
// registered, or the only one of its cluster that may lead (there is
// nobody to move to) stops at once. It logs how long the move took.
func (n *Node) controlledShutdown() {
	if !n.cfg.ControlledShutdown || n.svc == nil || n.brokerEpoch.Load() <= 0 || n.fenced.Load() {
		return
	}
	// Someone to move to: another broker that may lead (unfenced, not
	// shutting down itself). The last broker of a cluster stopping (its
	// quorum perhaps gone with the others) does not wait for nothing.
	others := 0
	n.view(func(st *metadata.State) {
		for _, b := range st.Brokers() {
			if b.ID != n.cfg.NodeID && !b.Fenced && !b.InControlledShutdown {
				others++
			}
		}
	})
	if others == 0 {
		return
	}
	start := time.Now()
	deadline := start.Add(n.cfg.BrokerSessionTimeout)
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		resp, err := n.svc.BrokerHeartbeat(ctx, metadata.BrokerHeartbeatRequest{
			BrokerID: n.cfg.NodeID, BrokerEpoch: n.brokerEpoch.Load(), CurrentMetadataOffset: n.metadataOffset(), WantShutDown: true,
		})
		cancel()
		if err == nil && resp.ShouldShutDown {
			n.fenced.Store(resp.IsFenced)
			// Keep serving until this node's own view has the moves, so it
			// answers NOT_LEADER_OR_FOLLOWER (clients go to the new leaders)
			// rather than taking writes for partitions it no longer leads.
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			n.waitMetadata(ctx, func(st *metadata.State) bool { return !leadsAny(st, n.cfg.NodeID) })
			cancel()
			n.logger.Info("broker: controlled shutdown: leaderships moved away", "took", time.Since(start).Round(time.Millisecond))
			return
		}
		if err != nil {
			n.logger.Warn("broker: controlled shutdown heartbeat failed", "err", err)
		}
		wait := min(n.cfg.BrokerHeartbeatInterval, time.Until(deadline))
		if wait <= 0 {
			n.logger.Warn("broker: controlled shutdown not confirmed within broker.session.timeout.ms, stopping anyway", "took", time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(wait)
	}
}

// leadsAny reports whether broker id leads a partition in st.
func leadsAny(st *metadata.State, id int32) bool {
	for _, t := range st.Topics() {
		for _, p := range st.Partitions(t.ID) {
			if p.Leader == id {
				return true
			}
		}
	}
	return false
}

func (n *Node) acceptLoop(ln net.Listener, name string) {
	opened, closed := n.metrics.connOpened.WithLabelValues(name), n.metrics.connClosed.WithLabelValues(name)
	counted := n.countedListener(name) // conn_quotas.go
	for {
		if counted && !n.connCounts.waitSlot(n.ctx.Done()) {
			return // max.connections: accept nothing until a connection closes
		}
		nc, err := ln.Accept()
		if err != nil {
			if n.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				n.logger.Warn("broker: accept", "err", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		ip := remoteIP(nc)
		if counted && n.connectionThrottled(nc, ip) {
			continue // connection_creation_rate: closed once the throttle passes
		}
		if !n.connCounts.open(ip, counted) {
			n.logger.Info("broker: connection refused: max.connections.per.ip", "remote", ip, "listener", name)
			nc.Close()
			continue
		}
		ts := n.tlsSrcs[name]
		if ts != nil {
			nc = tls.Server(nc, ts.serverConfig())
		}
		c := newConn(n, nc, name)
		n.connMu.Lock()
		if n.ctx.Err() != nil {
			n.connMu.Unlock()
			nc.Close()
			n.connCounts.close(ip, counted)
			return
		}
		n.conns[c] = struct{}{}
		n.connWG.Add(1)
		n.connMu.Unlock()
		opened.Inc()
		go func() {
			defer n.connWG.Done()
			if ts == nil || c.authenticateTLS(ts) {
				c.serve()
				<-c.done
			}
			// A connection the client closed was never killed: cancel its
			// context anyway, or the node's context keeps it (and its
			// reader's) as a child for as long as the node runs.
			c.cancel()
			n.connMu.Lock()
			delete(n.conns, c)
			n.connMu.Unlock()
			n.connCounts.close(ip, counted)
			closed.Inc()
		}()
	}
}

// register registers this broker with the controller, retrying until the
// quorum has a leader or ctx ends.
//
// The request carries meta.properties' cluster id once the quorum has
// confirmed it; the controller refuses an id not its own
// (INCONSISTENT_CLUSTER_ID: this node or its data directory belongs to
// another cluster), which ends the retries. A node without a confirmed id
// (its first start, or a meta.properties whose id an older version made up
// on its own) takes the quorum's and records it in meta.properties.
func (n *Node) register(ctx context.Context) error {
	req := metadata.RegisterBrokerRequest{BrokerID: n.cfg.NodeID, IncarnationID: n.incarnation, Listeners: n.advertised, Rack: n.cfg.Rack,
		PreviousBrokerEpoch: n.previousBrokerEpoch()}
	if n.props.confirmed {
		req.ClusterID = n.props.clusterID
	}
	for {
		resp, err := n.svc.RegisterBroker(ctx, req)
		if err == nil {
			if err := n.adoptClusterID(resp.ClusterID); err != nil {
				return err
			}
			n.brokerEpoch.Store(resp.BrokerEpoch)
			n.store.SetBrokerEpoch(resp.BrokerEpoch) // what a clean shutdown's marker records
			n.health.registered.Store(true)
			return nil
		}
		if metadata.ErrorCode(err) == kerr.InconsistentClusterID.Code {
			return fmt.Errorf("broker: the controller refused this node: %w", err)
		}
		if errors.Is(err, controller.ErrSASLFailed) {
			// Retrying cannot help: the credentials are this node's
			// configuration (the controller listener's jaas config).
			return fmt.Errorf("broker: the controller listener refused this node's SASL credentials (sasl.mechanism.controller.protocol, listener.name.%s.<mechanism>.sasl.jaas.config): %w",
				strings.ToLower(n.cfg.ControllerListenerName), err)
		}
		n.logger.Debug("broker: registration failed, retrying", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker: register with the controller: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// previousBrokerEpoch is the PreviousBrokerEpoch a registration sends
// (KIP-966): re-registering while running (the controller dropped our
// registration), the current epoch: nothing was lost; at start, the epoch
// the clean-shutdown markers recorded, -1 after an unclean shutdown, so
// the controller takes this broker out of every ISR and ELR until it has
// caught up again.
func (n *Node) previousBrokerEpoch() int64 {
	if e := n.brokerEpoch.Load(); e > 0 {
		return e
	}
	return n.store.CleanShutdownBrokerEpoch()
}

// helloClusterID is what this node's controller client says its cluster
// is (controller.ClientOptions.ClusterID): the quorum's once registered,
// before that meta.properties' id if the quorum confirmed it once (an id
// this node made up itself, before ids were the quorum's, is not sent: the
// quorum must not refuse the node for it).
func (n *Node) helloClusterID() func() string {
	var confirmed string
	if n.props.confirmed {
		confirmed = n.props.clusterID
	}
	return func() string {
		if id := n.ClusterID(); id != "" {
			return id
		}
		return confirmed
	}
}

// adoptClusterID takes the quorum's cluster id from a registration's
// response and, unless meta.properties already confirms it, writes it
// there (with node.id and incarnation.id).
func (n *Node) adoptClusterID(id string) error {
	if id == "" { // a controller that records no cluster id
		id = n.props.clusterID
	}
	n.clusterID.Store(&id)
	if id == "" || (n.props.confirmed && n.props.clusterID == id) {
		return nil
	}
	if n.props.clusterID != "" && n.props.clusterID != id {
		n.logger.Warn("broker: meta.properties had a cluster.id this node generated itself (before cluster ids were the quorum's); taking the quorum's",
			"old", n.props.clusterID, "cluster.id", id)
	}
	p := n.props
	p.clusterID, p.confirmed = id, true
	if err := writeMetaProperties(n.fs, n.cfg.LogDir, n.cfg.NodeID, p); err != nil {
		return err
	}
	n.props = p
	return nil
}

// heartbeatLoop heartbeats every 50ms while fenced (to be unfenced as soon
// as the metadata follower has caught up), then every
// broker.heartbeat.interval.ms.
func (n *Node) heartbeatLoop() {
	for {
		every := n.cfg.BrokerHeartbeatInterval
		if n.fenced.Load() {
			every = 50 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.BrokerSessionTimeout)
		sent := time.Now()
		resp, err := n.svc.BrokerHeartbeat(ctx, metadata.BrokerHeartbeatRequest{
			BrokerID: n.cfg.NodeID, BrokerEpoch: n.brokerEpoch.Load(), CurrentMetadataOffset: n.metadataOffset(),
		})
		cancel()
		if err == nil {
			n.fenced.Store(resp.IsFenced)
			n.health.lastBeat.Store(time.Now().UnixNano())
			if n.health.lastBeatSent.Swap(sent.UnixNano()) != 0 && n.presumedFencedSince.Swap(0) != 0 {
				n.logger.Info("broker: a controller answered a heartbeat again; leaderships in this node's view are served again")
			}
			if applied := n.appliedOffset(); n.metaLag.observe(time.Now(), applied, resp.MetadataOffset, n.cfg.QuorumRequestTimeout) {
				n.logger.Warn("broker: metadata view stays behind the controller leader; reopening the metadata stream",
					"applied", applied, "leader_offset", resp.MetadataOffset, "for_more_than", n.cfg.QuorumRequestTimeout)
				n.reopenWatch()
			}
		} else if n.ctx.Err() == nil {
			n.logger.Warn("broker: heartbeat failed", "err", err)
			if code := metadata.ErrorCode(err); code == kerr.StaleBrokerEpoch.Code || code == kerr.BrokerIDNotRegistered.Code {
				// The controller dropped our registration (a newer one
				// of this id, or UnregisterBroker): register again.
				if rerr := n.register(n.ctx); rerr != nil {
					return
				}
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// presumedFenced reports whether broker.session.timeout.ms has passed
// since this broker sent the last heartbeat a controller answered. The
// controller fences a broker silent that long and moves its leaderships to
// other ISR members, so the leaderships this node's (now stale) view gives
// it are void: a leader cut off from the controller quorum but not from
// clients would otherwise keep claiming its partitions, and producers
// with acks=all would retry REQUEST_TIMED_OUT against it instead of
// finding the new leader (kgo and the Java client refresh metadata only
// on NOT_LEADER_OR_FOLLOWER-like errors). While presumed fenced, this
// node answers produce to those partitions with NOT_LEADER_OR_FOLLOWER,
// shows them without a leader in Metadata (LEADER_NOT_AVAILABLE: clients
// ask another broker at once) and names no coordinator on itself;
// fetches still serve what was committed. Kafka's brokers have no such
// rule (a zombie leader is answered by the client's metadata.max.age.ms);
// the cost is that a broker whose whole controller quorum is gone stops
// taking writes too, which a cluster without a quorum cannot make durable
// anyway. A broker that has never had a heartbeat answered (starting up)
// is not presumed fenced: it leads nothing yet.
func (n *Node) presumedFenced() bool {
	sent := n.health.lastBeatSent.Load()
	if sent == 0 || time.Since(time.Unix(0, sent)) < n.cfg.BrokerSessionTimeout {
		return false
	}
	if n.presumedFencedSince.CompareAndSwap(0, time.Now().UnixNano()) {
		n.logger.Warn("broker: no controller answered a heartbeat within broker.session.timeout.ms; presumed fenced: this node's leaderships are void until one does",
			"last_heartbeat_sent", time.Unix(0, sent).UTC().Format(time.RFC3339Nano))
	}
	return true
}

func (n *Node) waitUnfenced(ctx context.Context) error {
	for n.fenced.Load() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker: waiting to be unfenced: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// partition returns the hosted partition, or nil.
func (n *Node) partition(topic string, index int32) *partition {
	n.partsMu.RLock()
	defer n.partsMu.RUnlock()
	return n.parts[tpKey{topic, index}]
}

// view runs fn with the metadata image under the read lock. fn must not
// keep st.
func (n *Node) view(fn func(st *metadata.State)) {
	n.metaMu.RLock()
	defer n.metaMu.RUnlock()
	fn(n.meta)
}

// waitMetadata waits until cond holds on the metadata view (checked now
// and after each applied delta) or ctx ends; it reports whether cond held.
func (n *Node) waitMetadata(ctx context.Context, cond func(st *metadata.State) bool) bool {
	for {
		n.metaMu.RLock()
		// Only a view whose partitions are open counts: a handler woken
		// here finds the logs the metadata promises.
		ok := n.reconciled == n.meta.Offset() && cond(n.meta)
		ch := n.metaNotify
		n.metaMu.RUnlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// controllerID is the ControllerID Metadata reports. Clients send admin
// requests (CreateTopics, DeleteTopics, ...) there; every Strata broker
// serves them by forwarding to the quorum, so, like a KRaft broker (which
// reports a random live broker), this broker reports itself.
func (n *Node) controllerID() int32 { return n.cfg.NodeID }

// dialContext dials a peer (another broker's listener) from this node's
// own address: the host of its first advertised listener when that is an
// IP, so a peer (or a fault-injecting proxy between nodes on loopback,
// 127.0.0.2, .3, ...) sees which node is connecting.
func (n *Node) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: n.localAddr()}
	if n.interTLS != nil {
		return n.interTLS.dial(ctx, &d, network, addr)
	}
	return d.DialContext(ctx, network, addr)
}

// localAddr is the address dialContext and the controller connections
// (the client of the quorum, the Raft transport, forwarding) dial from:
// the host of the first advertised listener when it is an IP, else nil
// (the system chooses).
func (n *Node) localAddr() net.Addr {
	if ls := n.advertisedListeners(); len(ls) > 0 {
		if ip := net.ParseIP(ls[0].Host); ip != nil && !ip.IsUnspecified() {
			return &net.TCPAddr{IP: ip}
		}
	}
	return nil
}
