package raftlog

import (
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// memLog is the in-memory copy of the log since the last compaction, kept
// with raft.MemoryStorage's conventions so the two can be compared in a
// differential test: ents[0] is a dummy that only carries the index and
// term of the last compacted (or snapshotted) entry; ents[i] has index
// ents[0].Index+i.
//
// Why memory and not an index of file positions: the controller's log is
// metadata (small records, a snapshot every few thousand entries), so the
// entries between two compactions fit easily in memory, and raft reads
// Term and Entries on every message it sends; serving them from memory
// keeps the raft goroutine off the disk for everything but Save.
//
// Entries are shared, never mutated: truncation and compaction allocate a
// new backing array whenever existing elements would be overwritten, so a
// slice handed out earlier stays valid.
type memLog struct {
	ents []*pb.Entry
}

func newMemLog(index, term uint64) *memLog {
	return &memLog{ents: []*pb.Entry{dummyEntry(index, term)}}
}

func dummyEntry(index, term uint64) *pb.Entry {
	return &pb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term)}
}

func (l *memLog) dummyIndex() uint64 { return l.ents[0].GetIndex() }
func (l *memLog) firstIndex() uint64 { return l.ents[0].GetIndex() + 1 }
func (l *memLog) lastIndex() uint64  { return l.ents[0].GetIndex() + uint64(len(l.ents)) - 1 }

func (l *memLog) term(i uint64) (uint64, error) {
	off := l.ents[0].GetIndex()
	if i < off {
		return 0, raft.ErrCompacted
	}
	if i-off >= uint64(len(l.ents)) {
		return 0, raft.ErrUnavailable
	}
	return l.ents[i-off].GetTerm(), nil
}

// entries returns [lo, hi) limited to maxSize bytes (proto.Size, as raft
// counts them) but always at least one entry.
func (l *memLog) entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	off := l.ents[0].GetIndex()
	if lo <= off {
		return nil, raft.ErrCompacted
	}
	if hi > l.lastIndex()+1 {
		return nil, fmt.Errorf("raftlog: entries [%d, %d) beyond last index %d: %w", lo, hi, l.lastIndex(), raft.ErrUnavailable)
	}
	if len(l.ents) == 1 {
		return nil, raft.ErrUnavailable
	}
	if lo >= hi {
		return nil, nil
	}
	ents := l.ents[lo-off : hi-off]
	size := uint64(proto.Size(ents[0]))
	for n := 1; n < len(ents); n++ {
		size += uint64(proto.Size(ents[n]))
		if size > maxSize {
			ents = ents[:n]
			break
		}
	}
	return ents[:len(ents):len(ents)], nil
}

// trimAppend returns the part of ents that append would keep (entries at
// or below the dummy are covered by the snapshot and dropped) and checks
// it is contiguous with the log and with itself, without changing l.
func (l *memLog) trimAppend(ents []*pb.Entry) ([]*pb.Entry, error) {
	if len(ents) == 0 {
		return nil, nil
	}
	for i := 1; i < len(ents); i++ {
		if ents[i].GetIndex() != ents[0].GetIndex()+uint64(i) {
			return nil, fmt.Errorf("%w: entry %d follows %d", ErrNonContiguous, ents[i].GetIndex(), ents[i-1].GetIndex())
		}
	}
	first := l.firstIndex()
	if last := ents[0].GetIndex() + uint64(len(ents)) - 1; last < first {
		return nil, nil
	}
	if first > ents[0].GetIndex() {
		ents = ents[first-ents[0].GetIndex():]
	}
	if ents[0].GetIndex() > l.lastIndex()+1 {
		return nil, fmt.Errorf("%w: first new entry %d, last index %d", ErrNonContiguous, ents[0].GetIndex(), l.lastIndex())
	}
	return ents, nil
}

// append adds ents (already checked by trimAppend), replacing every entry
// at or after ents[0].Index: raft overwrote an uncommitted suffix.
func (l *memLog) append(ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	off := ents[0].GetIndex() - l.ents[0].GetIndex()
	if uint64(len(l.ents)) > off {
		// The three-index slice forces a copy, so the replaced entries that
		// callers may still hold are not overwritten.
		l.ents = append(l.ents[:off:off], ents...)
		return
	}
	l.ents = append(l.ents, ents...)
}

// compact makes index the new dummy.
func (l *memLog) compact(index uint64) error {
	off := l.ents[0].GetIndex()
	if index <= off {
		return raft.ErrCompacted
	}
	if index > l.lastIndex() {
		return fmt.Errorf("raftlog: compact %d beyond last index %d: %w", index, l.lastIndex(), raft.ErrUnavailable)
	}
	i := index - off
	ents := make([]*pb.Entry, 1, uint64(len(l.ents))-i)
	ents[0] = dummyEntry(l.ents[i].GetIndex(), l.ents[i].GetTerm())
	l.ents = append(ents, l.ents[i+1:]...)
	return nil
}

// size is the encoded size of the entries after the dummy.
func (l *memLog) size() int64 {
	var n int64
	for _, e := range l.ents[1:] {
		n += int64(proto.Size(e))
	}
	return n
}
