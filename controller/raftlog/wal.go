package raftlog

// Format migration
//
// The WAL format version is walVersion, written in every segment's header
// record; snapshot files carry snapVersion. Open refuses a version it does
// not know (ErrUnsupportedVersion) rather than guess.
//
//	version 1 (this code): frames of [len][crc32c][type][payload]; segment
//	  header then one batch record per Save; batch sub-records entry,
//	  hard state, snapshot reset.
//
// To change the format: add a version, keep the reader of every older one,
// write only the newest, and let old segments age out through compaction
// (segments are never rewritten in place). A new sub-record kind needs a
// new version, because a version-1 reader treats an unknown kind as
// corruption.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// File names in a log directory. Numbers are zero-padded to 20 digits so a
// sorted listing is in index order.
const (
	// walSuffix: "<20-digit first index>.wal", a WAL segment. The number is
	// the index of the first entry the segment was created for; it is
	// strictly increasing from one segment to the next (if raft overwrote a
	// suffix below the previous segment's number the next one is bumped to
	// previous+1), so name order is write order.
	walSuffix = ".wal"
	// snapSuffix: "<20-digit term>-<20-digit index>.snap", a snapshot file.
	snapSuffix = ".snap"
	// tmpSuffix: a snapshot being written; renamed to .snap once fsynced,
	// removed by Open if a crash left it behind.
	tmpSuffix = ".tmp" // vfs.AtomicTmpSuffix, which writeSnapshotFile uses
	// corruptSuffix: a snapshot that failed its checksum, renamed by Open
	// and kept for inspection; never read again.
	corruptSuffix = ".corrupt"
)

const (
	walVersion = 1

	// frameHeaderLen is len u32 + crc32c u32.
	frameHeaderLen = 8
	// maxFrameLen bounds a frame's declared length; anything larger is
	// damage, not data (a Save of a gigabyte is not a metadata write).
	maxFrameLen = 1 << 30

	// Frame types.
	recHeader = 1 // first frame of every segment
	recBatch  = 2 // one per Save

	// Batch sub-record kinds.
	subEntry     = 1 // a raftpb.Entry, proto-marshalled
	subHardState = 2 // a raftpb.HardState, proto-marshalled
	subSnapshot  = 3 // the log was reset to a snapshot: index u64, term u64

	walMagic = "SWAL"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errBadFrame marks bytes that are not a whole, checksummed frame: a torn
// tail if nothing valid follows, corruption otherwise.
var errBadFrame = errors.New("raftlog: bad frame")

func walName(first uint64) string { return fmt.Sprintf("%020d%s", first, walSuffix) }

func snapName(term, index uint64) string {
	return fmt.Sprintf("%020d-%020d%s", term, index, snapSuffix)
}

func parseWALName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, walSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func parseSnapName(name string) (term, index uint64, ok bool) {
	s, ok := strings.CutSuffix(name, snapSuffix)
	if !ok || len(s) != 41 || s[20] != '-' {
		return 0, 0, false
	}
	t, err1 := strconv.ParseUint(s[:20], 10, 64)
	i, err2 := strconv.ParseUint(s[21:], 10, 64)
	return t, i, err1 == nil && err2 == nil
}

// appendFrame appends one frame to dst. The layout, little-endian:
//
//	+---------+------------+---------+---------------------+
//	| len u32 | crc32c u32 | type u8 | payload (len-1 B)   |
//	+---------+------------+---------+---------------------+
//	len = 1 + len(payload): the bytes after the crc
//	crc = CRC-32C (Castagnoli) of the 4 len bytes, then type and payload,
//	      so a damaged length is caught as surely as a damaged payload.
//
// A segment is a header frame followed by batch frames:
//
//	header payload:  "SWAL" | version u8 | first index u64
//	batch payload:   sub-record*, each  kind u8 | len uvarint | body
//	  kind 1 entry       body = proto raftpb.Entry
//	  kind 2 hard state  body = proto raftpb.HardState
//	  kind 3 snapshot    body = index u64 | term u64: the log was replaced
//	                     by a snapshot at (index, term)
//
// One Save is one batch frame written with one write and one fsync, so a
// Save is atomic: after a crash its frame is either whole (checksum good)
// or torn (and cut off by recovery). Within a batch, sub-records apply in
// order: snapshot reset, then entries (replacing any suffix from the first
// new index on, exactly as raft.MemoryStorage.Append does), then hard
// state. The first batch of a segment starts with a copy of the current
// hard state, so deleting older segments never loses the vote.
func appendFrame(dst []byte, typ byte, payload []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(1+len(payload)))
	dst = append(dst, 0, 0, 0, 0, typ)
	dst = append(dst, payload...)
	binary.LittleEndian.PutUint32(dst[start+4:], frameCRC(dst[start:start+4], dst[start+8:]))
	return dst
}

func frameCRC(lenBytes, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(lenBytes, crcTable), crcTable, body)
}

// readFrame parses the frame at b[pos:]. It returns errBadFrame for
// anything that is not a whole frame with a good checksum.
func readFrame(b []byte, pos int) (typ byte, payload []byte, next int, err error) {
	if pos < 0 || len(b)-pos < frameHeaderLen+1 {
		return 0, nil, 0, errBadFrame
	}
	n := binary.LittleEndian.Uint32(b[pos:])
	if n < 1 || n > maxFrameLen || uint64(len(b)-pos-frameHeaderLen) < uint64(n) {
		return 0, nil, 0, errBadFrame
	}
	body := b[pos+frameHeaderLen : pos+frameHeaderLen+int(n)]
	if frameCRC(b[pos:pos+4], body) != binary.LittleEndian.Uint32(b[pos+4:]) {
		return 0, nil, 0, errBadFrame
	}
	return body[0], body[1:], pos + frameHeaderLen + int(n), nil
}

// findFrame reports the first offset at or after from where a whole,
// checksummed frame starts. Recovery uses it to tell a torn tail (nothing
// valid after the damage) from damage in the middle of acknowledged data
// (a later Save's frame survives after it).
func findFrame(b []byte, from int) (int, bool) {
	for p := from; p+frameHeaderLen < len(b); p++ {
		if typ, _, _, err := readFrame(b, p); err == nil && (typ == recHeader || typ == recBatch) {
			return p, true
		}
	}
	return 0, false
}

func headerPayload(first uint64) []byte {
	p := make([]byte, 0, len(walMagic)+1+8)
	p = append(p, walMagic...)
	p = append(p, walVersion)
	return binary.LittleEndian.AppendUint64(p, first)
}

func parseHeader(p []byte) (first uint64, err error) {
	if len(p) != len(walMagic)+1+8 || string(p[:len(walMagic)]) != walMagic {
		return 0, fmt.Errorf("%w: bad segment header", ErrCorrupt)
	}
	if v := p[len(walMagic)]; v != walVersion {
		return 0, fmt.Errorf("%w: WAL version %d", ErrUnsupportedVersion, v)
	}
	return binary.LittleEndian.Uint64(p[len(walMagic)+1:]), nil
}

func appendSub(dst []byte, kind byte, body []byte) []byte {
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	return append(dst, body...)
}

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// appendSubProto appends a sub-record holding m, marshalled in place.
func appendSubProto(dst []byte, kind byte, m proto.Message) ([]byte, error) {
	n := marshalOpts.Size(m)
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(n))
	return marshalOpts.MarshalAppend(dst, m)
}

// batch is a decoded batch frame.
type batch struct {
	hs      []*pb.HardState // in order; the last wins
	snap    bool
	snapIdx uint64
	snapTrm uint64
	ents    []*pb.Entry
}

// decodeBatch parses a batch payload whose checksum was good. An error here
// is corruption (or a bug), never a torn write.
func decodeBatch(p []byte) (batch, error) {
	var b batch
	// Sub-records come in the order the writer puts them: a leading hard
	// state (the copy at a segment's start), a snapshot reset, entries, a
	// trailing hard state; every part optional.
	const (
		start = iota
		leadHS
		reset
		entries
		trailHS
	)
	stage := start
	for len(p) > 0 {
		kind := p[0]
		n, k := binary.Uvarint(p[1:])
		if k <= 0 || n > uint64(len(p)-1-k) {
			return batch{}, fmt.Errorf("%w: bad sub-record length", ErrCorrupt)
		}
		body := p[1+k : 1+k+int(n)]
		p = p[1+k+int(n):]
		switch kind {
		case subHardState:
			if stage == trailHS {
				return batch{}, fmt.Errorf("%w: misplaced hard state", ErrCorrupt)
			}
			hs := &pb.HardState{}
			if err := proto.Unmarshal(body, hs); err != nil {
				return batch{}, fmt.Errorf("%w: hard state: %v", ErrCorrupt, err)
			}
			b.hs = append(b.hs, hs)
			if stage == start {
				stage = leadHS
			} else {
				stage = trailHS
			}
		case subSnapshot:
			if stage > leadHS || len(body) != 16 {
				return batch{}, fmt.Errorf("%w: misplaced snapshot sub-record", ErrCorrupt)
			}
			stage = reset
			b.snap = true
			b.snapIdx = binary.LittleEndian.Uint64(body)
			b.snapTrm = binary.LittleEndian.Uint64(body[8:])
		case subEntry:
			if stage == trailHS {
				return batch{}, fmt.Errorf("%w: entry after hard state", ErrCorrupt)
			}
			stage = entries
			e := &pb.Entry{}
			if err := proto.Unmarshal(body, e); err != nil {
				return batch{}, fmt.Errorf("%w: entry: %v", ErrCorrupt, err)
			}
			if len(b.ents) > 0 && e.GetIndex() != b.ents[len(b.ents)-1].GetIndex()+1 {
				return batch{}, fmt.Errorf("%w: entry %d follows %d in one batch", ErrCorrupt, e.GetIndex(), b.ents[len(b.ents)-1].GetIndex())
			}
			b.ents = append(b.ents, e)
		default:
			return batch{}, fmt.Errorf("%w: unknown sub-record kind %d", ErrCorrupt, kind)
		}
	}
	return b, nil
}

// segment is one WAL file as the writer tracks it.
type segment struct {
	name  string
	first uint64 // the number in the name
	size  int64
	// maxLive is the highest index of an entry written in this segment that
	// no later write replaced (or the index of a snapshot reset recorded in
	// it); 0 if none. A segment is deleted by Compact only when maxLive is
	// at or below what every kept snapshot covers.
	maxLive uint64
}

// noteAppend records in segs that entries [first, last] were written to
// the last segment, replacing anything at or after first.
func noteAppend(segs []*segment, first, last uint64) {
	for _, sg := range segs {
		if sg.maxLive >= first {
			sg.maxLive = first - 1
		}
	}
	segs[len(segs)-1].maxLive = last
}

// noteReset records that the log was replaced by a snapshot at index,
// recorded in the last segment.
func noteReset(segs []*segment, index uint64) {
	for _, sg := range segs {
		sg.maxLive = 0
	}
	segs[len(segs)-1].maxLive = index
}

func joinDir(dir, name string) string { return filepath.Join(dir, name) }
