package broker

import "github.com/strata-io/strata/broker/share"

// shareStatePersister is the share.Persister through which DeleteGroups
// deletes a share group's state: the node's (n.sharePersister, the share
// coordinator's RPCs), or fallback for a group coordinator built without a
// node (unit tests).
func shareStatePersister(n *Node, fallback share.Persister) share.Persister {
	if n == nil || n.sharePersister == nil {
		return fallback
	}
	return n.sharePersister
}
