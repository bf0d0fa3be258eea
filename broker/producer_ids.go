package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// producerIDFile holds the end of the last producer-id block this node
// reserved:
//
//	next=<counter>\n
//
// Ids are handed out only below the reserved end, and the end is made
// durable before any id of a new block is used, so a restart (even after
// kill -9) never hands out an id twice: it starts at the reserved end,
// skipping at most one block.
const (
	producerIDFile      = "producer-id-block"
	producerIDBlockSize = 1000
)

// producerIDs allocates producer ids unique across the cluster and across
// restarts without the controller: the node id in the high 32 bits, a
// durable per-node counter in the low 32 (Kafka's controller hands out
// blocks with AllocateProducerIds; ours does not yet).
type producerIDs struct {
	nodeID int32
	path   string

	mu         sync.Mutex // guards next, reservedTo
	next       int64
	reservedTo int64
}

func openProducerIDs(dir string, nodeID int32) (*producerIDs, error) {
	p := &producerIDs{nodeID: nodeID, path: filepath.Join(dir, producerIDFile)}
	b, err := os.ReadFile(p.path)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, fmt.Errorf("broker: read %s: %w", p.path, err)
	default:
		v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "next=")
		n, perr := strconv.ParseInt(v, 10, 64)
		if !ok || perr != nil || n < 0 {
			return nil, fmt.Errorf("broker: %s: bad content %q", p.path, b)
		}
		p.next, p.reservedTo = n, n
	}
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
		if err := writeFileDurably(p.path, []byte(fmt.Sprintf("next=%d\n", end))); err != nil {
			return 0, err
		}
		p.reservedTo = end
	}
	id := int64(p.nodeID)<<32 | p.next
	p.next++
	return id, nil
}
