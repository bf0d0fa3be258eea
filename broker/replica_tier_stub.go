package broker

import (
	"context"
	"errors"
)

// rebuildFromTier is the contract between the replica fetcher and the
// tiered follower rebuild (KIP-405's tier state machine, REPLICATION.md
// §1.13; broker/replica_tier.go). The fetcher calls it, holding the
// partition as follower, when the leader answers
// OFFSET_MOVED_TO_TIERED_STORAGE, with the leader's log start and local
// log start (ListOffsets -4); it rebuilds p's log so fetching can resume
// at the returned offset.
//
// This stub stands until replica_tier.go is merged (delete this file
// then): the fetcher backs off and retries.
func (n *Node) rebuildFromTier(ctx context.Context, p *partition, leaderLogStart, leaderLocalStart int64) (resumeAt int64, err error) {
	return -1, errors.New("broker: rebuilding a follower from the remote tier is not built yet")
}
