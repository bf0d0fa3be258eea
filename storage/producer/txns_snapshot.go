package producer

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// Transaction-state snapshot ([Txns.Snapshot]), format version 0, written
// by storage as <offset>.txnsnapshot. All integers are big endian.
//
//	offset  size  field
//	     0     4  magic    "STX0" (0x53545830)
//	     4     2  version  uint16, 0
//	     6     4  crc      uint32  CRC-32C (Castagnoli) of bytes [10, end)
//	    10     8  offset   int64   the log end offset the state is at (>= 0)
//	    18     4  count    uint32  number of producer entries
//	    22     .  entries  count x 38 bytes, producer id strictly ascending
//	     .     4  ucount   uint32  number of unreplicated transactions
//	     .     .  unrepl   ucount x 24 bytes, marker offset strictly ascending
//
// entry (38 bytes):
//
//	offset  size  field
//	     0     8  producerId        int64  >= 0
//	     8     2  epoch             int16
//	    10     4  coordinatorEpoch  int32  >= -1
//	    14     8  firstOffset       int64  -1 (no open transaction) or in [0, offset)
//	    22     8  lastOffset        int64  in [-1, offset), >= firstOffset when open
//	    30     8  lastTimestamp     int64  ms
//
// unreplicated transaction (24 bytes): a transaction completed by a marker
// the high watermark had not passed when the snapshot was taken (it stays
// unstable until it does; Kafka keeps these in memory only, so its
// restart could expose a transaction whose marker a new leader lacks):
//
//	offset  size  field
//	     0     8  producerId   int64  >= 0
//	     8     8  firstOffset  int64  in [0, lastOffset]
//	    16     8  lastOffset   int64  the marker's offset, in [0, offset)
//
// The encoding is canonical: [RestoreTxns] accepts exactly what
// [Txns.Snapshot] produces, so restore-then-snapshot returns the input.
//
// Format migration: none yet; a new version gets a new number and
// RestoreTxns keeps reading the old ones. An unknown version is
// [ErrCorruptSnapshot]: the caller replays the log instead.
const (
	txnSnapMagic      = 0x53545830 // "STX0"
	txnSnapVersion    = 0
	txnSnapHeaderSize = 22
	txnSnapEntrySize  = 38
	txnSnapUnreplSize = 24
)

// Snapshot encodes the table, for a log that ends at offset.
func (t *Txns) Snapshot(offset int64) []byte {
	ids := make([]int64, 0, len(t.producers))
	for id := range t.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := make([]byte, txnSnapHeaderSize, txnSnapHeaderSize+len(ids)*txnSnapEntrySize)
	be := binary.BigEndian
	be.PutUint32(b[0:], txnSnapMagic)
	be.PutUint16(b[4:], txnSnapVersion)
	be.PutUint64(b[10:], uint64(offset))
	be.PutUint32(b[18:], uint32(len(ids)))
	for _, id := range ids {
		e := t.producers[id]
		var r [txnSnapEntrySize]byte
		be.PutUint64(r[0:], uint64(e.ID))
		be.PutUint16(r[8:], uint16(e.Epoch))
		be.PutUint32(r[10:], uint32(e.CoordinatorEpoch))
		be.PutUint64(r[14:], uint64(e.FirstOffset))
		be.PutUint64(r[22:], uint64(e.LastOffset))
		be.PutUint64(r[30:], uint64(e.LastTimestamp))
		b = append(b, r[:]...)
	}
	b = be.AppendUint32(b, uint32(len(t.unreplicated)))
	for _, c := range t.unreplicated {
		b = be.AppendUint64(b, uint64(c.ProducerID))
		b = be.AppendUint64(b, uint64(c.FirstOffset))
		b = be.AppendUint64(b, uint64(c.LastOffset))
	}
	be.PutUint32(b[6:], crc32.Checksum(b[10:], castagnoli))
	return b
}

// RestoreTxns decodes a [Txns.Snapshot] and returns the table and the
// offset it was taken at. Bytes that fail the magic, version, checksum,
// length or consistency checks return an error wrapping
// [ErrCorruptSnapshot].
func RestoreTxns(b []byte) (*Txns, int64, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: transaction snapshot: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
	}
	if len(b) < txnSnapHeaderSize {
		return nil, 0, corrupt("%d bytes, header needs %d", len(b), txnSnapHeaderSize)
	}
	be := binary.BigEndian
	if m := be.Uint32(b[0:]); m != txnSnapMagic {
		return nil, 0, corrupt("magic %#08x", m)
	}
	if v := be.Uint16(b[4:]); v != txnSnapVersion {
		return nil, 0, corrupt("unknown version %d", v)
	}
	if want, got := be.Uint32(b[6:]), crc32.Checksum(b[10:], castagnoli); want != got {
		return nil, 0, corrupt("crc %#08x, computed %#08x", want, got)
	}
	offset := int64(be.Uint64(b[10:]))
	count := int64(be.Uint32(b[18:]))
	if offset < 0 {
		return nil, 0, corrupt("offset %d", offset)
	}
	if int64(len(b)-txnSnapHeaderSize) < count*txnSnapEntrySize+4 {
		return nil, 0, corrupt("%d entries in %d bytes", count, len(b)-txnSnapHeaderSize)
	}
	ub := b[txnSnapHeaderSize+count*txnSnapEntrySize:]
	ucount := int64(be.Uint32(ub))
	if int64(len(ub)-4) != ucount*txnSnapUnreplSize {
		return nil, 0, corrupt("%d unreplicated transactions in %d bytes", ucount, len(ub)-4)
	}
	t := NewTxns()
	prev := int64(-1)
	for i := int64(0); i < count; i++ {
		r := b[txnSnapHeaderSize+i*txnSnapEntrySize:]
		e := &TxnProducer{
			ID:               int64(be.Uint64(r[0:])),
			Epoch:            int16(be.Uint16(r[8:])),
			CoordinatorEpoch: int32(be.Uint32(r[10:])),
			FirstOffset:      int64(be.Uint64(r[14:])),
			LastOffset:       int64(be.Uint64(r[22:])),
			LastTimestamp:    int64(be.Uint64(r[30:])),
		}
		switch {
		case e.ID <= prev:
			return nil, 0, corrupt("producer %d after %d", e.ID, prev)
		case e.CoordinatorEpoch < -1:
			return nil, 0, corrupt("producer %d coordinator epoch %d", e.ID, e.CoordinatorEpoch)
		case e.FirstOffset < -1 || e.FirstOffset >= offset:
			return nil, 0, corrupt("producer %d first offset %d at offset %d", e.ID, e.FirstOffset, offset)
		case e.LastOffset < -1 || e.LastOffset >= offset || (e.FirstOffset >= 0 && e.LastOffset < e.FirstOffset):
			return nil, 0, corrupt("producer %d last offset %d (first %d) at offset %d", e.ID, e.LastOffset, e.FirstOffset, offset)
		}
		prev = e.ID
		t.producers[e.ID] = e
		if e.FirstOffset >= 0 {
			t.open++
			if t.first < 0 || e.FirstOffset < t.first {
				t.first = e.FirstOffset
			}
		}
	}
	for i := int64(0); i < ucount; i++ {
		r := ub[4+i*txnSnapUnreplSize:]
		c := CompletedTxn{ProducerID: int64(be.Uint64(r[0:])), FirstOffset: int64(be.Uint64(r[8:])), LastOffset: int64(be.Uint64(r[16:]))}
		switch {
		case c.ProducerID < 0 || c.FirstOffset < 0 || c.FirstOffset > c.LastOffset || c.LastOffset >= offset:
			return nil, 0, corrupt("unreplicated transaction %+v at offset %d", c, offset)
		case i > 0 && c.LastOffset <= t.unreplicated[i-1].LastOffset:
			return nil, 0, corrupt("unreplicated transaction at %d after %d", c.LastOffset, t.unreplicated[i-1].LastOffset)
		}
		t.unreplicated = append(t.unreplicated, c)
	}
	t.recomputeUnreplFirst()
	return t, offset, nil
}
