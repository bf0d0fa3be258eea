package controller

// FSM is the replicated state machine a node applies committed entries to.
// The node calls it from its Ready loop goroutine only, in log order, so an
// implementation needs no locking for the node's sake (the [Controller]'s
// metadata FSM locks for its own readers).
//
// Buffers: data passed to Apply and Restore belongs to raft; copy what must
// be kept. Snapshot returns a buffer the caller owns.
//
// Errors: Apply returns an error only for an entry that cannot be decoded
// ([ErrCorruptEntry]); an entry that decodes but is inconsistent with the
// state is skipped by the FSM (deterministically, on every replica) and is
// not an error. Restore returns an error for a snapshot it cannot read.
//
// Idempotence: Restore replaces the whole state and may be repeated.
type FSM interface {
	// Apply applies the payload of the committed normal entry at index.
	// Empty entries (a new leader's) are passed too, with empty data.
	Apply(index uint64, data []byte) error
	// Snapshot returns the state as of the last applied index.
	Snapshot() ([]byte, error)
	// Restore replaces the state by the snapshot taken at index.
	Restore(index uint64, data []byte) error
}
