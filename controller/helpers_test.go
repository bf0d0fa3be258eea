package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// Test timings: 20ms ticks, elections after 15-30 ticks (300-600ms), so a
// leader starved for a moment under -race on 2 busy cores does not step
// down; clusters start by having node 1 campaign at once.
const (
	testTick          = 20 * time.Millisecond
	testElectionTicks = 15
	testWait          = 10 * time.Second
)

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// logFSM is a test FSM: the list of payloads applied, in order, and the
// index of each.
type logFSM struct {
	mu      sync.Mutex
	Entries []string
	Index   uint64
}

func (f *logFSM) Apply(index uint64, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(data) > 0 {
		f.Entries = append(f.Entries, string(data))
	}
	f.Index = index
	return nil
}

func (f *logFSM) Snapshot() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return json.Marshal(f)
}

func (f *logFSM) Restore(index uint64, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Entries = nil
	if err := json.Unmarshal(data, f); err != nil {
		return err
	}
	if f.Index != index {
		return fmt.Errorf("snapshot index %d, restore at %d", f.Index, index)
	}
	return nil
}

func (f *logFSM) entries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Entries...)
}

// nodeCluster is N bare raft nodes (no metadata) on a SimNetwork, each
// with a MemoryStorage that survives its node's restart like a disk.
type nodeCluster struct {
	t        testing.TB
	net      *SimNetwork
	ids      []uint64
	storages map[uint64]*MemoryStorage
	fsms     map[uint64]*logFSM
	nodes    map[uint64]*node
	snapN    uint64
}

func newNodeCluster(t testing.TB, n int, snapEntries uint64) *nodeCluster {
	c := &nodeCluster{
		t:        t,
		net:      NewSimNetwork(1),
		storages: map[uint64]*MemoryStorage{},
		fsms:     map[uint64]*logFSM{},
		nodes:    map[uint64]*node{},
		snapN:    snapEntries,
	}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, uint64(i))
		c.storages[uint64(i)] = NewMemoryStorage()
	}
	for _, id := range c.ids {
		c.start(id)
	}
	c.nodes[1].campaign()
	t.Cleanup(func() {
		for _, id := range c.ids {
			c.stop(id)
		}
		c.net.Close()
	})
	return c
}

func (c *nodeCluster) start(id uint64) {
	c.t.Helper()
	fsm := &logFSM{}
	n, err := newNode(nodeConfig{
		id: id, peers: c.ids, storage: c.storages[id], fsm: fsm, transport: c.net.Endpoint(id),
		tick: testTick, electionTicks: testElectionTicks, heartbeatTicks: 1,
		snapshotEntries: c.snapN, catchUpEntries: c.snapN / 2,
		maxSizePerMsg: 1 << 20, maxInflight: 256, logger: testLogger(),
	})
	if err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
	if err := n.start(); err != nil {
		c.t.Fatalf("node %d start: %v", id, err)
	}
	c.nodes[id] = n
	c.fsms[id] = fsm
}

func (c *nodeCluster) stop(id uint64) {
	n := c.nodes[id]
	if n == nil {
		return
	}
	n.Stop()
	n.cfg.transport.Stop()
	delete(c.nodes, id)
}

// leader waits until the running nodes agree on one leader that is ready
// to decide, and returns it.
func (c *nodeCluster) leader(exclude ...uint64) uint64 {
	c.t.Helper()
	return c.leaderAmong(nil, exclude...)
}

// leaderAmong is leader restricted to the nodes in among (nil = all).
func (c *nodeCluster) leaderAmong(among []uint64, exclude ...uint64) uint64 {
	c.t.Helper()
	var last uint64
	ok := waitFor(testWait, func() bool {
		var lead uint64
		for id, n := range c.nodes {
			if among != nil && !slices.Contains(among, id) {
				continue
			}
			if n.isLeaderReady() {
				lead = id
			}
		}
		if lead == 0 {
			return false
		}
		for _, x := range exclude {
			if x == lead {
				return false
			}
		}
		for id, n := range c.nodes {
			if among != nil && !slices.Contains(among, id) {
				continue
			}
			if n.leader.Load() != lead {
				return false
			}
		}
		last = lead
		return true
	})
	if !ok {
		c.t.Fatalf("no leader within %v", testWait)
	}
	return last
}

// propose proposes on the current leader, retrying through leader changes.
func (c *nodeCluster) propose(payload string) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(testWait)
	for time.Now().Before(deadline) {
		lead := c.leader()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		idx, err := c.nodes[lead].Propose(ctx, []byte(payload))
		cancel()
		if err == nil {
			return idx
		}
	}
	c.t.Fatalf("propose %q: no success within %v", payload, testWait)
	return 0
}

// waitFor polls cond until it holds (true) or d passes (false).
func waitFor(d time.Duration, cond func() bool) bool {
	return testutil.Within(d, cond) == nil
}

// ctrlCluster is N Controllers. Raft runs over a SimNetwork (sim=true) or
// TCP on loopback; RPC always runs on each controller's loopback listener.
// Storage survives a controller's restart: MemoryStorage kept in the
// harness, or raftlog files in a temp dir (disk=true).
type ctrlCluster struct {
	t      testing.TB
	sim    *SimNetwork
	disk   bool
	voters []Voter
	dirs   map[int32]string
	mem    map[int32]*MemoryStorage
	ctrls  map[int32]*Controller
	tune   func(*Config)
	// clusterIDs are the voters' Options.ClusterID (meta.properties ids).
	clusterIDs map[int32]string
	// clusterID and incs are what each controller says in its Raft hello.
	clusterID string
	incs      map[int32]uuid.UUID
	bootstrap []metadata.Record
	sasl      *SASLServer
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex // guards addrs
	addrs map[int32]string
	// regs are the controllers' metrics registries (Options.Registry),
	// a fresh one at each start.
	regs map[int32]*prometheus.Registry
}

type clusterOpts struct {
	n    int
	tcp  bool // Raft over loopback TCP instead of the SimNetwork
	disk bool // raftlog storage in temp dirs instead of MemoryStorage
	tune func(*Config)
	// clusterIDs, by voter id: the cluster id each one's meta.properties
	// has (Options.ClusterID); none by default.
	clusterIDs map[int32]string
	// clusterID is every controller's Options.ClusterID (each also gets an
	// incarnation of its own).
	clusterID string
	// bootstrap is every controller's Options.Bootstrap.
	bootstrap []metadata.Record
	// sasl and dial are every controller's Options.SASL and Options.Dial.
	sasl *SASLServer
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// clusterIDOf is voter id's Options.ClusterID: its own from clusterIDs,
// else the one every voter shares.
func (c *ctrlCluster) clusterIDOf(id int32) string {
	if cid, ok := c.clusterIDs[id]; ok {
		return cid
	}
	return c.clusterID
}

func newCtrlCluster(t testing.TB, o clusterOpts) *ctrlCluster {
	t.Helper()
	c := &ctrlCluster{
		t: t, disk: o.disk, tune: o.tune, clusterIDs: o.clusterIDs, clusterID: o.clusterID, incs: map[int32]uuid.UUID{}, bootstrap: o.bootstrap, sasl: o.sasl, dial: o.dial,
		dirs: map[int32]string{}, mem: map[int32]*MemoryStorage{},
		ctrls: map[int32]*Controller{}, addrs: map[int32]string{}, regs: map[int32]*prometheus.Registry{},
	}
	if !o.tcp {
		c.sim = NewSimNetwork(7)
	}
	// Bind every listener first so the voter list carries real ports.
	lns := map[int32]net.Listener{}
	for i := 1; i <= o.n; i++ {
		id := int32(i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		c.voters = append(c.voters, Voter{ID: id, Addr: ln.Addr().String()})
		c.addrs[id] = ln.Addr().String()
		c.dirs[id] = t.TempDir()
		c.mem[id] = NewMemoryStorage()
		c.incs[id] = uuid.New()
	}
	t.Cleanup(func() {
		for id := range c.ctrls {
			c.stop(id)
		}
		if c.sim != nil {
			c.sim.Close()
		}
	})
	for _, v := range c.voters {
		c.startWith(v.ID, lns[v.ID])
	}
	c.ctrls[1].node.campaign()
	return c
}

func (c *ctrlCluster) config(id int32) Config {
	cfg := Config{
		NodeID:                  id,
		Roles:                   []Role{RoleController},
		Voters:                  c.voters,
		MetadataLogDir:          c.dirs[id],
		TickInterval:            testTick,
		ElectionTicks:           testElectionTicks,
		HeartbeatTicks:          1,
		BrokerSessionTimeout:    9 * time.Second,
		BrokerHeartbeatInterval: 2 * time.Second,
		ProposalTimeout:         2 * time.Second,
		Logger:                  testLogger(),
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	return cfg
}

// start restarts a stopped controller on its address and storage.
func (c *ctrlCluster) start(id int32) {
	c.t.Helper()
	var ln net.Listener
	var err error
	addr := c.voters[id-1].Addr
	if c.sim != nil {
		addr = "127.0.0.1:0" // RPC only: any port, published in addrs
	}
	if !waitFor(testWait, func() bool { ln, err = net.Listen("tcp", addr); return err == nil }) {
		c.t.Fatalf("listen %s: %v", addr, err)
	}
	c.startWith(id, ln)
}

func (c *ctrlCluster) startWith(id int32, ln net.Listener) {
	c.t.Helper()
	o := Options{
		Config:      c.config(id),
		Listener:    ln,
		Seed:        uint64(id),
		ClusterID:   c.clusterIDOf(id),
		Bootstrap:   c.bootstrap,
		Incarnation: c.incs[id],
		SASL:        c.sasl,
		Dial:        c.dial,
		Resolve: func(id int32) string {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.addrs[id]
		},
	}
	if c.sim != nil {
		o.Transport = c.sim.Endpoint(uint64(id))
	}
	if !c.disk {
		o.Storage = c.mem[id]
	}
	reg := prometheus.NewRegistry()
	o.Registry, c.regs[id] = reg, reg
	ctl, err := Open(o)
	if err != nil {
		c.t.Fatalf("open controller %d: %v", id, err)
	}
	c.mu.Lock()
	c.addrs[id] = ctl.Addr()
	c.mu.Unlock()
	c.ctrls[id] = ctl
}

func (c *ctrlCluster) stop(id int32) {
	if ctl := c.ctrls[id]; ctl != nil {
		if err := ctl.Close(); err != nil {
			c.t.Errorf("close controller %d: %v", id, err)
		}
		delete(c.ctrls, id)
	}
}

// leader waits for a leader among the running controllers that all of them
// (or all in among) agree on.
func (c *ctrlCluster) leader(among ...int32) *Controller {
	c.t.Helper()
	var lead *Controller
	ok := waitFor(testWait, func() bool {
		lead = nil
		for id, ctl := range c.ctrls {
			if len(among) > 0 && !slices.Contains(among, id) {
				continue
			}
			if ctl.IsLeader() {
				lead = ctl
			}
		}
		if lead == nil {
			return false
		}
		for id, ctl := range c.ctrls {
			if len(among) > 0 && !slices.Contains(among, id) {
				continue
			}
			if l, _, _ := ctl.Leader(); l != lead.ID() {
				return false
			}
		}
		return true
	})
	if !ok {
		c.t.Fatalf("no controller leader within %v", testWait)
	}
	return lead
}

func (c *ctrlCluster) follower() *Controller {
	lead := c.leader()
	for _, ctl := range c.ctrls {
		if ctl != lead {
			return ctl
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// waitApplied waits until every running controller has applied offset.
func (c *ctrlCluster) waitApplied(off int64) {
	c.t.Helper()
	if !waitFor(testWait, func() bool {
		for _, ctl := range c.ctrls {
			if ctl.State().Offset() < off {
				return false
			}
		}
		return true
	}) {
		c.t.Fatalf("offset %d not applied everywhere within %v", off, testWait)
	}
}

func ctx(t testing.TB) context.Context {
	cx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return cx
}

// registerBrokers registers brokers 1..n (rack r<i%racks> when racks > 0)
// and heartbeats them unfenced.
func registerBrokers(t testing.TB, s Service, n, racks int) map[int32]int64 {
	t.Helper()
	epochs := map[int32]int64{}
	for i := 1; i <= n; i++ {
		id := int32(100 + i)
		rack := ""
		if racks > 0 {
			rack = fmt.Sprintf("r%d", i%racks)
		}
		resp, err := s.RegisterBroker(ctx(t), metadata.RegisterBrokerRequest{
			BrokerID: id, IncarnationID: uuid.New(), Rack: rack,
			Listeners: []metadata.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: int32(9000 + i), SecurityProtocol: "PLAINTEXT"}},
		})
		if err != nil {
			t.Fatalf("register broker %d: %v", id, err)
		}
		epochs[id] = resp.BrokerEpoch
	}
	for id, ep := range epochs {
		hb, err := s.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: id, BrokerEpoch: ep, CurrentMetadataOffset: 1 << 40})
		if err != nil {
			t.Fatalf("heartbeat broker %d: %v", id, err)
		}
		if hb.IsFenced {
			t.Fatalf("broker %d still fenced after catching up", id)
		}
	}
	return epochs
}

// netListenClose returns a loopback address nobody listens on.
func netListenClose() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
