package broker

import (
	"fmt"
	"sync"

	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// The producer-id block (storage.ProducerIDBlockFile, in the first data
// directory, read and written by storage) holds the end of the last block
// of producer ids this node reserved. Ids are handed out only below the
// reserved end, and the end is made durable before any id of a new block is used, so a restart (even after
// kill -9) never hands out an id twice: it starts at the reserved end,
// skipping at most one block.
const producerIDBlockSize = 1000

// producerIDs allocates producer ids unique across the cluster and across
// restarts without the controller: the node id in the high 32 bits, a
// durable per-node counter in the low 32 (Kafka's controller hands out
// blocks with AllocateProducerIds; ours does not yet).
type producerIDs struct {
	nodeID int32
	dir    string // holds storage.ProducerIDBlockFile
	fs     vfs.FS

	mu         sync.Mutex // guards next, reservedTo
	next       int64
	reservedTo int64
}

func openProducerIDs(fs vfs.FS, dir string, nodeID int32) (*producerIDs, error) {
	p := &producerIDs{nodeID: nodeID, dir: dir, fs: fs}
	n, _, err := storage.ReadProducerIDBlock(fs, dir)
	if err != nil {
		return nil, err
	}
	p.next, p.reservedTo = n, n
	return p, nil
}

// allocate returns a new producer id.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.reservedTo {
		end := p.reservedTo + producerIDBlockSize
		if end >= 1<<32 {
			return 0, fmt.Errorf("broker: producer ids of node %d exhausted", p.nodeID)
		}
		if err := storage.WriteProducerIDBlock(p.fs, p.dir, end); err != nil {
			return 0, err
		}
		p.reservedTo = end
	}
	id := int64(p.nodeID)<<32 | p.next
	p.next++
	return id, nil
}
