package controller

import "errors"

// Sentinel errors. Each says who returns it.
var (
	// ErrInvalidConfig is wrapped by [ParseConfig], [ParseVoters] and
	// [Config.Validate] for a bad setting.
	ErrInvalidConfig = errors.New("controller: invalid config")
	// ErrStopped is returned by every call on a stopped [Controller] or node
	// and by a [Transport] after Close.
	ErrStopped = errors.New("controller: stopped")
	// ErrNotLeader is returned by Propose on a node that is not the Raft
	// leader, and when leadership is lost before the proposal was applied;
	// the caller retries (against the leader; see [NotControllerError]).
	ErrNotLeader = errors.New("controller: not the leader")
	// ErrProposalDropped is returned by Propose when raft dropped the
	// proposal (no leader known, or a leadership transfer in progress).
	ErrProposalDropped = errors.New("controller: proposal dropped")
	// ErrCorruptEntry is returned when a committed entry's payload cannot be
	// decoded. It is fatal for the node: the log is the source of truth.
	ErrCorruptEntry = errors.New("controller: corrupt entry")
	// ErrProtocol is returned by [Client] and the listener for a malformed
	// frame.
	ErrProtocol = errors.New("controller: protocol error")
)
