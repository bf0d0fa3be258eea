package controller

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/storage/vfs"
)

// Kafka configuration names understood by [ParseConfig]. They are the names
// Kafka's KRaft mode uses, so an operator's server.properties carries over.
const (
	KeyNodeID                    = "node.id"
	KeyProcessRoles              = "process.roles"
	KeyQuorumVoters              = "controller.quorum.voters"
	KeyControllerListenerNames   = "controller.listener.names"
	KeyListeners                 = "listeners"
	KeyMetadataLogDir            = "metadata.log.dir"
	KeyBrokerSessionTimeoutMs    = "broker.session.timeout.ms"
	KeyBrokerHeartbeatIntervalMs = "broker.heartbeat.interval.ms"
	KeyElectionTimeoutMs         = "controller.quorum.election.timeout.ms"
	KeyRaftTickMs                = "strata.controller.raft.tick.ms"
	KeySnapshotEntries           = "strata.controller.snapshot.entries"
	KeyMaxSnapshotBytes          = "metadata.log.max.snapshot.interval.bytes" // accepted, unused
)

// Defaults for the zero values of [Config].
const (
	DefaultBrokerSessionTimeout    = 9000 * time.Millisecond
	DefaultBrokerHeartbeatInterval = 2000 * time.Millisecond
	DefaultTickInterval            = 100 * time.Millisecond
	DefaultElectionTicks           = 10
	DefaultHeartbeatTicks          = 1
	DefaultSnapshotEntries         = 10000
	DefaultSnapshotCatchUpEntries  = 5000
	DefaultMaxSizePerMsg           = 1 << 20
	DefaultMaxInflightMsgs         = 256
	DefaultProposalTimeout         = 10 * time.Second
	DefaultFrameReadTimeout        = 30 * time.Second
	// DefaultLeaderImbalanceCheckInterval and
	// DefaultLeaderImbalancePerBrokerPercentage are Kafka's
	// leader.imbalance.check.interval.seconds (300) and
	// leader.imbalance.per.broker.percentage (10).
	DefaultLeaderImbalanceCheckInterval       = 300 * time.Second
	DefaultLeaderImbalancePerBrokerPercentage = 10
	// metadataDirName is the directory under metadata.log.dir holding the
	// Raft WAL and snapshots, named as Kafka names it.
	metadataDirName = "__cluster_metadata-0"
)

// Role is one of the roles in process.roles.
type Role string

// The roles a process can take.
const (
	RoleBroker     Role = "broker"
	RoleController Role = "controller"
)

// Voter is one member of controller.quorum.voters: a node id and the address
// of its CONTROLLER listener.
type Voter struct {
	ID   int32
	Addr string // host:port
}

// String renders the voter as Kafka spells it: id@host:port.
func (v Voter) String() string { return fmt.Sprintf("%d@%s", v.ID, v.Addr) }

// Config configures a [Controller]. Field comments give the Kafka property
// each field is read from by [ParseConfig].
type Config struct {
	// NodeID is node.id, the Raft id of this controller (> 0).
	NodeID int32
	// Roles is process.roles; a Controller needs RoleController in it.
	Roles []Role
	// Voters is controller.quorum.voters: 1, 3 or 5 voters, ids unique.
	Voters []Voter
	// ListenerName is controller.listener.names (first entry), "CONTROLLER".
	ListenerName string
	// ListenAddr is the address the CONTROLLER listener binds. Empty means
	// this node's address in Voters. Port 0 is allowed in tests.
	ListenAddr string
	// MetadataLogDir is metadata.log.dir; the WAL lives in
	// MetadataLogDir/__cluster_metadata-0.
	MetadataLogDir string
	// BrokerSessionTimeout is broker.session.timeout.ms: a broker that has
	// not heartbeated for this long is fenced by the leader.
	BrokerSessionTimeout time.Duration
	// BrokerHeartbeatInterval is broker.heartbeat.interval.ms, returned to
	// brokers so they know how often to heartbeat.
	BrokerHeartbeatInterval time.Duration

	// MinInsyncReplicas and UncleanLeaderElection are the broker-level
	// min.insync.replicas and unclean.leader.election.enable this node
	// was started with: the elections' fallback for topics that set
	// neither, when no cluster-wide dynamic default does (0 and false:
	// Kafka's defaults, 1 and false).
	MinInsyncReplicas     int32
	UncleanLeaderElection bool

	// AutoLeaderRebalance is auto.leader.rebalance.enable: the leader
	// checks every LeaderImbalanceCheckInterval
	// (leader.imbalance.check.interval.seconds, 0: 300s) whether a
	// broker's share of the partitions it prefers but does not lead is
	// above LeaderImbalancePerBrokerPercentage
	// (leader.imbalance.per.broker.percentage; 0: any imbalance), and then elects it
	// for them, one batch per check (rebalance.go). A zero Config leaves
	// it off; the broker's configuration turns it on by default, as Kafka.
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int

	// TickInterval is the Raft tick (strata.controller.raft.tick.ms).
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks are Raft's ElectionTick and
	// HeartbeatTick. controller.quorum.election.timeout.ms sets
	// ElectionTicks = timeout / TickInterval.
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotEntries is how many applied entries trigger a snapshot
	// (strata.controller.snapshot.entries). SnapshotCatchUpEntries entries
	// are kept behind the snapshot for slow followers.
	SnapshotEntries        uint64
	SnapshotCatchUpEntries uint64
	// MaxSizePerMsg and MaxInflightMsgs are passed to raft.
	MaxSizePerMsg   uint64
	MaxInflightMsgs int
	// ProposalTimeout bounds a service call that proposes (when the caller's
	// context has no earlier deadline).
	ProposalTimeout time.Duration
	// FrameReadTimeout bounds how long a frame on the CONTROLLER listener
	// may take to arrive once its header has, and how long a new
	// connection may take to identify itself (its first frame). The broker
	// sets it from strata.socket.request.read.timeout.ms.
	FrameReadTimeout time.Duration

	// FS is the file system for the WAL; nil means vfs.Default.
	FS vfs.FS
	// Logger, nil means slog.Default().
	Logger *slog.Logger
}

// ParseVoters parses controller.quorum.voters: "1@127.0.0.1:9093,2@host:9093".
func ParseVoters(s string) ([]Voter, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: %s is empty", ErrInvalidConfig, KeyQuorumVoters)
	}
	var vs []Voter
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		idStr, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("%w: voter %q is not id@host:port", ErrInvalidConfig, part)
		}
		id, err := strconv.ParseInt(idStr, 10, 32)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%w: voter %q has a bad id", ErrInvalidConfig, part)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%w: voter %q has a bad address: %v", ErrInvalidConfig, part, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%w: voter %q has a bad port", ErrInvalidConfig, part)
		}
		vs = append(vs, Voter{ID: int32(id), Addr: addr})
	}
	return vs, nil
}

// VoterAddrs returns the voters' CONTROLLER addresses: what a broker-only
// process (process.roles=broker) passes to [NewClient] as Addrs.
func VoterAddrs(vs []Voter) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Addr
	}
	return out
}

// FormatVoters renders voters as controller.quorum.voters.
func FormatVoters(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

// ParseConfig reads a Config from Kafka-style properties. Unknown keys are
// ignored (they belong to the broker); known keys with bad values are
// errors. The result is validated.
func ParseConfig(props map[string]string) (Config, error) {
	var c Config
	get := func(k string) (string, bool) {
		v, ok := props[k]
		return strings.TrimSpace(v), ok
	}
	ms := func(k string) (time.Duration, bool, error) {
		v, ok := get(k)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, false, fmt.Errorf("%w: %s=%q", ErrInvalidConfig, k, v)
		}
		return time.Duration(n) * time.Millisecond, true, nil
	}
	if v, ok := get(KeyNodeID); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return c, fmt.Errorf("%w: %s=%q", ErrInvalidConfig, KeyNodeID, v)
		}
		c.NodeID = int32(n)
	}
	if v, ok := get(KeyProcessRoles); ok {
		for _, r := range strings.Split(v, ",") {
			c.Roles = append(c.Roles, Role(strings.TrimSpace(r)))
		}
	}
	if v, ok := get(KeyQuorumVoters); ok {
		vs, err := ParseVoters(v)
		if err != nil {
			return c, err
		}
		c.Voters = vs
	}
	if v, ok := get(KeyControllerListenerNames); ok {
		c.ListenerName = strings.TrimSpace(strings.Split(v, ",")[0])
	}
	if v, ok := get(KeyListeners); ok {
		// listeners=PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9093
		name := c.ListenerName
		if name == "" {
			name = "CONTROLLER"
		}
		for _, l := range strings.Split(v, ",") {
			n, addr, ok := strings.Cut(strings.TrimSpace(l), "://")
			if ok && strings.EqualFold(n, name) {
				c.ListenAddr = addr
			}
		}
	}
	if v, ok := get(KeyMetadataLogDir); ok {
		c.MetadataLogDir = v
	}
	var err error
	var ok bool
	if c.BrokerSessionTimeout, _, err = ms(KeyBrokerSessionTimeoutMs); err != nil {
		return c, err
	}
	if c.BrokerHeartbeatInterval, _, err = ms(KeyBrokerHeartbeatIntervalMs); err != nil {
		return c, err
	}
	if c.TickInterval, _, err = ms(KeyRaftTickMs); err != nil {
		return c, err
	}
	var election time.Duration
	if election, ok, err = ms(KeyElectionTimeoutMs); err != nil {
		return c, err
	} else if ok {
		tick := c.TickInterval
		if tick == 0 {
			tick = DefaultTickInterval
		}
		c.ElectionTicks = max(int(election/tick), 2)
	}
	if v, ok := get(KeySnapshotEntries); ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return c, fmt.Errorf("%w: %s=%q", ErrInvalidConfig, KeySnapshotEntries, v)
		}
		c.SnapshotEntries = n
	}
	c.setDefaults()
	return c, c.Validate()
}

// setDefaults fills zero fields with defaults.
func (c *Config) setDefaults() {
	if len(c.Roles) == 0 {
		c.Roles = []Role{RoleBroker, RoleController}
	}
	if c.ListenerName == "" {
		c.ListenerName = "CONTROLLER"
	}
	if c.BrokerSessionTimeout == 0 {
		c.BrokerSessionTimeout = DefaultBrokerSessionTimeout
	}
	if c.BrokerHeartbeatInterval == 0 {
		c.BrokerHeartbeatInterval = DefaultBrokerHeartbeatInterval
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.SnapshotCatchUpEntries == 0 {
		c.SnapshotCatchUpEntries = min(DefaultSnapshotCatchUpEntries, c.SnapshotEntries)
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = DefaultMaxSizePerMsg
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = DefaultMaxInflightMsgs
	}
	if c.ProposalTimeout == 0 {
		c.ProposalTimeout = DefaultProposalTimeout
	}
	if c.FrameReadTimeout == 0 {
		c.FrameReadTimeout = DefaultFrameReadTimeout
	}
	if c.LeaderImbalanceCheckInterval == 0 {
		c.LeaderImbalanceCheckInterval = DefaultLeaderImbalanceCheckInterval
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ListenAddr == "" {
		if v, ok := c.voter(c.NodeID); ok {
			c.ListenAddr = v.Addr
		}
	}
}

// Validate checks the configuration: a positive node.id that is one of
// 1, 3 or 5 unique voters, a known role set including controller, and sane
// timings. It returns an error wrapping [ErrInvalidConfig].
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if c.NodeID <= 0 {
		return bad("%s must be > 0, got %d", KeyNodeID, c.NodeID)
	}
	isController := false
	for _, r := range c.Roles {
		switch r {
		case RoleController:
			isController = true
		case RoleBroker:
		default:
			return bad("%s: unknown role %q", KeyProcessRoles, r)
		}
	}
	if !isController {
		return bad("%s must include controller to run a controller", KeyProcessRoles)
	}
	switch len(c.Voters) {
	case 1, 3, 5:
	default:
		return bad("%s must list 1, 3 or 5 voters, got %d", KeyQuorumVoters, len(c.Voters))
	}
	seen := map[int32]bool{}
	for _, v := range c.Voters {
		if seen[v.ID] {
			return bad("%s: voter id %d repeated", KeyQuorumVoters, v.ID)
		}
		seen[v.ID] = true
	}
	if !seen[c.NodeID] {
		return bad("%s=%d is not in %s", KeyNodeID, c.NodeID, KeyQuorumVoters)
	}
	if c.HeartbeatTicks >= c.ElectionTicks {
		return bad("election ticks (%d) must exceed heartbeat ticks (%d)", c.ElectionTicks, c.HeartbeatTicks)
	}
	if c.BrokerHeartbeatInterval >= c.BrokerSessionTimeout {
		return bad("%s must be below %s", KeyBrokerHeartbeatIntervalMs, KeyBrokerSessionTimeoutMs)
	}
	if c.SnapshotCatchUpEntries > c.SnapshotEntries {
		return bad("snapshot catch-up entries (%d) above snapshot interval (%d)", c.SnapshotCatchUpEntries, c.SnapshotEntries)
	}
	return nil
}

// WALDir is the directory holding the Raft WAL and snapshots.
func (c *Config) WALDir() string { return filepath.Join(c.MetadataLogDir, metadataDirName) }

func (c *Config) voter(id int32) (Voter, bool) {
	for _, v := range c.Voters {
		if v.ID == id {
			return v, true
		}
	}
	return Voter{}, false
}

// voterIDs returns the voter ids sorted.
func (c *Config) voterIDs() []uint64 {
	ids := make([]uint64, 0, len(c.Voters))
	for _, v := range c.Voters {
		ids = append(ids, uint64(v.ID))
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
