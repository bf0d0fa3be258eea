package broker

import "github.com/strata-io/strata/broker/share"

// shareStatePersister is the share.Persister through which DeleteGroups
// deletes a share group's state. The node's persister (n.sharePersister,
// added by the share-partition leader and share coordinator slices) is not
// on this branch: until they are merged this is the group coordinator's
// own MemPersister (fallback). MERGE: replace the body by
// `return n.sharePersister`.
func shareStatePersister(n *Node, fallback share.Persister) share.Persister {
	_ = n
	return fallback
}
