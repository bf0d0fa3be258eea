package producer

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Producer snapshot, format version 1. All integers are big endian.
//
//	offset  size  field
//	     0     4  magic         "SPS1" (0x53505331)
//	     4     2  version       uint16, 1
//	     6     4  crc           uint32  CRC-32C (Castagnoli) of bytes [10, end)
//	    10     4  count         uint32  number of producer entries
//	    14     .  entries       count entries, producer id strictly ascending
//
// entry (31 bytes + 32 per batch):
//
//	offset  size  field
//	     0     8  producerId        int64   >= 0
//	     8     2  epoch             int16
//	    10     4  coordinatorEpoch  int32   -1 until transactions
//	    14     8  txnFirstOffset    int64   -1 = no open transaction
//	    22     8  lastTimestamp     int64   ms
//	    30     1  batchCount        uint8   0..5
//	    31     .  batches           batchCount x batch, oldest first
//
// batch (32 bytes):
//
//	offset  size  field
//	     0     4  firstSeq     int32  >= 0
//	     4     4  lastSeq      int32  = firstSeq + (lastOffset - firstOffset), wrapping at MaxInt32
//	     8     8  firstOffset  int64  >= 0, above the previous batch's lastOffset
//	    16     8  lastOffset   int64  >= firstOffset, at most MaxInt32 above it
//	    24     8  timestamp    int64  append time, ms
//
// Unlike Kafka's snapshot (which keeps only each producer's last batch) all
// retained batches are kept, so a client retrying across a broker restart
// still gets its duplicate acknowledged rather than OUT_OF_ORDER_SEQUENCE.
// The encoding is canonical: a State has exactly one snapshot, and
// [State.Restore] accepts exactly the bytes [State.Snapshot] can produce
// (sorted ids, no trailing bytes), so restore-then-snapshot returns the
// input unchanged.
//
// Format migration: a new version gets a new version number and Restore
// keeps reading every older one. An unknown version is reported as
// [ErrCorruptSnapshot]: the caller rebuilds from the log, which is always
// possible, so a downgrade loses nothing.
const (
	snapMagic      = 0x53505331 // "SPS1"
	snapVersion    = 1
	snapHeaderSize = 14
	snapEntrySize  = 31
	snapBatchSize  = 32

	offSnapMagic   = 0
	offSnapVersion = 4
	offSnapCRC     = 6
	offSnapCount   = 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot encodes the whole State, an open [Tx]'s updates included, in
// the format drawn above: [State.SnapshotAt] with no offset limit.
func (s *State) Snapshot() []byte {
	return s.AppendSnapshotAt(nil, math.MaxInt64)
}

// SnapshotAt encodes the State as it stands for a log that ends at
// nextOffset, which is what storage.LogOptions.ProducerSnapshot asks for
// at a roll: batches at or above nextOffset are left out. The bytes are
// the caller's and are the same for equal States, whatever order producers
// were added in.
//
// It gives the exact answer whatever the roll interleaves with, provided
// every append goes through a [Tx] (Begin, Update, log append, Commit):
// the roll inside the log append, before the request's batches are
// written, asks for their first offset and gets the entries as they were
// before the Tx (from its undo records); a roll after the write and before
// Commit asks for the new end and gets them with the Tx's batches. Batches
// at or above nextOffset recorded outside a Tx are simply dropped, as
// [State.TruncateTo] would, which can forget batches they had evicted.
func (s *State) SnapshotAt(nextOffset int64) []byte {
	return s.AppendSnapshotAt(nil, nextOffset)
}

// AppendSnapshotAt appends [State.SnapshotAt]'s bytes to dst and returns
// the extended slice, so the caller can reuse a buffer.
func (s *State) AppendSnapshotAt(dst []byte, nextOffset int64) []byte {
	start := len(dst)
	dst = grow(dst, snapHeaderSize)
	h := dst[start:]
	be := binary.BigEndian
	be.PutUint32(h[offSnapMagic:], snapMagic)
	be.PutUint16(h[offSnapVersion:], snapVersion)
	count := uint32(0)
	for _, id := range s.sortedIDs() {
		e, ok := s.entryAt(s.producers[id], nextOffset)
		if !ok {
			continue
		}
		count++
		dst = be.AppendUint64(dst, uint64(e.id))
		dst = be.AppendUint16(dst, uint16(e.epoch))
		dst = be.AppendUint32(dst, uint32(e.coordinatorEpoch))
		dst = be.AppendUint64(dst, uint64(e.txnFirstOffset))
		dst = be.AppendUint64(dst, uint64(e.lastTimestamp))
		dst = append(dst, uint8(e.n))
		for i := 0; i < e.n; i++ {
			m := &e.batches[i]
			dst = be.AppendUint32(dst, uint32(m.FirstSeq))
			dst = be.AppendUint32(dst, uint32(m.LastSeq))
			dst = be.AppendUint64(dst, uint64(m.FirstOffset))
			dst = be.AppendUint64(dst, uint64(m.LastOffset))
			dst = be.AppendUint64(dst, uint64(m.Timestamp))
		}
	}
	h = dst[start:]
	be.PutUint32(h[offSnapCount:], count)
	be.PutUint32(h[offSnapCRC:], crc32.Checksum(h[offSnapCount:], castagnoli))
	return dst
}

// entryAt returns e as it stands for a log ending at next, and false if
// the producer would not exist yet.
func (s *State) entryAt(e *entry, next int64) (entry, bool) {
	v := *e
	if v.n == 0 || v.batches[v.n-1].LastOffset < next {
		if v.txnFirstOffset >= next {
			v.txnFirstOffset = -1
		}
		return v, true
	}
	if r := s.tx.record(e.id); r != nil {
		// Start from the entry before the Tx and replay the Tx's batches
		// that lie below next: those are the batches after the old
		// entry's last offset still in the window.
		oldLast := int64(-1)
		if r.existed {
			v = r.old
			if v.n > 0 {
				oldLast = v.batches[v.n-1].LastOffset
			}
		} else {
			v = entry{id: e.id, epoch: e.epoch, coordinatorEpoch: -1, txnFirstOffset: -1}
		}
		for i := 0; i < e.n; i++ {
			b := e.batches[i]
			if b.FirstOffset <= oldLast || b.LastOffset >= next {
				continue
			}
			if v.epoch != e.epoch {
				v.epoch = e.epoch
				v.n = 0
			}
			v.push(b)
			v.lastTimestamp = b.Timestamp
			if e.txnFirstOffset > oldLast && e.txnFirstOffset < next && v.txnFirstOffset < 0 {
				v.txnFirstOffset = e.txnFirstOffset
			}
		}
		return v, r.existed || v.n > 0
	}
	for v.n > 0 && v.batches[v.n-1].LastOffset >= next {
		v.n--
	}
	if v.txnFirstOffset >= next {
		v.txnFirstOffset = -1
	}
	return v, v.n > 0
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// Restore replaces the State's contents with the snapshot in data. On any
// error, which wraps [ErrCorruptSnapshot], the State is left unchanged. The
// State keeps no reference to data. Restore does not expire producers:
// call [State.RemoveExpired] after it (as [Load] does).
func (s *State) Restore(data []byte) error {
	s.mustNotBeInTx("Restore")
	m, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	s.producers = m
	return nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptSnapshot}, args...)...)
}

// decodeSnapshot checks and decodes a snapshot. Every check a State's own
// snapshot passes is made here, so that what is accepted re-encodes to the
// same bytes and nothing accepted can break a later Check or Update.
func decodeSnapshot(b []byte) (map[int64]*entry, error) {
	be := binary.BigEndian
	if len(b) < snapHeaderSize {
		return nil, corrupt("%d bytes, header needs %d", len(b), snapHeaderSize)
	}
	if m := be.Uint32(b[offSnapMagic:]); m != snapMagic {
		return nil, corrupt("magic %#08x", m)
	}
	if v := be.Uint16(b[offSnapVersion:]); v != snapVersion {
		return nil, corrupt("unknown version %d", v)
	}
	if want, got := be.Uint32(b[offSnapCRC:]), crc32.Checksum(b[offSnapCount:], castagnoli); want != got {
		return nil, corrupt("crc %#08x, computed %#08x", want, got)
	}
	count := be.Uint32(b[offSnapCount:])
	// Bound the count by the bytes present before allocating for it.
	if uint64(count) > uint64(len(b)-snapHeaderSize)/snapEntrySize {
		return nil, corrupt("%d entries cannot fit in %d bytes", count, len(b)-snapHeaderSize)
	}
	m := make(map[int64]*entry, count)
	// One slab for all entries: two allocations for any count.
	slab := make([]entry, count)
	p := snapHeaderSize
	prevID := int64(-1)
	for i := uint32(0); i < count; i++ {
		if len(b)-p < snapEntrySize {
			return nil, corrupt("entry %d truncated", i)
		}
		e := &slab[i]
		*e = entry{
			id:               int64(be.Uint64(b[p:])),
			epoch:            int16(be.Uint16(b[p+8:])),
			coordinatorEpoch: int32(be.Uint32(b[p+10:])),
			txnFirstOffset:   int64(be.Uint64(b[p+14:])),
			lastTimestamp:    int64(be.Uint64(b[p+22:])),
			n:                int(b[p+30]),
		}
		p += snapEntrySize
		if e.id <= prevID {
			return nil, corrupt("producer id %d after %d", e.id, prevID)
		}
		prevID = e.id
		if e.txnFirstOffset < -1 {
			return nil, corrupt("producer %d transaction first offset %d", e.id, e.txnFirstOffset)
		}
		if e.n > BatchesPerProducer {
			return nil, corrupt("producer %d has %d batches", e.id, e.n)
		}
		if len(b)-p < e.n*snapBatchSize {
			return nil, corrupt("producer %d batches truncated", e.id)
		}
		prevLast := int64(-1)
		for j := 0; j < e.n; j++ {
			bm := BatchMeta{
				FirstSeq:    int32(be.Uint32(b[p:])),
				LastSeq:     int32(be.Uint32(b[p+4:])),
				FirstOffset: int64(be.Uint64(b[p+8:])),
				LastOffset:  int64(be.Uint64(b[p+16:])),
				Timestamp:   int64(be.Uint64(b[p+24:])),
			}
			p += snapBatchSize
			if err := checkBatchMeta(bm, prevLast); err != nil {
				return nil, corrupt("producer %d batch %d: %v", e.id, j, err)
			}
			prevLast = bm.LastOffset
			e.batches[j] = bm
		}
		m[e.id] = e
	}
	if p != len(b) {
		return nil, corrupt("%d trailing bytes", len(b)-p)
	}
	return m, nil
}

// checkBatchMeta checks one decoded batch against the invariants Update
// keeps; prevLast is the previous batch's last offset (-1 for the first).
func checkBatchMeta(m BatchMeta, prevLast int64) error {
	if m.FirstSeq < 0 || m.LastSeq < 0 {
		return fmt.Errorf("negative sequence %d..%d", m.FirstSeq, m.LastSeq)
	}
	if m.FirstOffset <= prevLast || m.FirstOffset < 0 {
		return fmt.Errorf("first offset %d not above %d", m.FirstOffset, prevLast)
	}
	d := m.LastOffset - m.FirstOffset
	if m.LastOffset < m.FirstOffset || d > math.MaxInt32 {
		return fmt.Errorf("offsets %d..%d", m.FirstOffset, m.LastOffset)
	}
	if incSeq(m.FirstSeq, int32(d)) != m.LastSeq {
		return fmt.Errorf("sequences %d..%d do not span offsets %d..%d", m.FirstSeq, m.LastSeq, m.FirstOffset, m.LastOffset)
	}
	return nil
}
