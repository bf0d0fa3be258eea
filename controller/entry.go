package controller

import (
	"encoding/binary"
	"fmt"
)

// Every normal Raft entry the node proposes carries this header in front of
// the FSM's payload, so the proposer can recognise its own entry when it is
// applied and wake the caller waiting in Propose:
//
//	+---------+----------------------+----------------------+-----------+
//	| version | proposer node id     | proposal id          | payload   |
//	| u8 = 1  | uvarint              | uvarint              | FSM bytes |
//	+---------+----------------------+----------------------+-----------+
//
// The proposal id starts at a random value per process so an entry proposed
// before a restart is never mistaken for one proposed after it. A new
// leader's empty entry has no data at all and is passed to the FSM as an
// empty payload.
//
// Format migration: version 1 is the only version. A future version keeps
// the first byte as the version so older entries stay readable.
const entryVersion = 1

func encodeEntry(node, id uint64, payload []byte) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(payload))
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, node)
	b = binary.AppendUvarint(b, id)
	return append(b, payload...)
}

// decodeEntry splits an entry's data. Empty data is a leader's empty entry
// and decodes to zero ids and no payload.
func decodeEntry(data []byte) (node, id uint64, payload []byte, err error) {
	if len(data) == 0 {
		return 0, 0, nil, nil
	}
	if data[0] != entryVersion {
		return 0, 0, nil, fmt.Errorf("%w: entry version %d", ErrCorruptEntry, data[0])
	}
	b := data[1:]
	node, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: bad proposer id", ErrCorruptEntry)
	}
	b = b[n:]
	id, n = binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: bad proposal id", ErrCorruptEntry)
	}
	return node, id, b[n:], nil
}
