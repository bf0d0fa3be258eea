package raftlog

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/storage/vfs"
)

const (
	snapMagic   = "SSNP"
	snapVersion = 1
)

// snapInfo is a snapshot file kept in the directory.
type snapInfo struct {
	name        string
	term, index uint64
	size        int64
	time        time.Time
}

// encodeSnapshot lays out a snapshot file, little-endian:
//
//	+-----------+------------+---------------------------+-------------+
//	| "SSNP" 4B | version u8 | proto raftpb.Snapshot ... | crc32c u32  |
//	+-----------+------------+---------------------------+-------------+
//	crc = CRC-32C of every byte before it.
//
// The file name repeats the term and index of the metadata inside; a
// mismatch is corruption.
func encodeSnapshot(snap *pb.Snapshot) ([]byte, error) {
	b := make([]byte, 0, len(snapMagic)+1+marshalOpts.Size(snap)+4)
	b = append(b, snapMagic...)
	b = append(b, snapVersion)
	b, err := marshalOpts.MarshalAppend(b, snap)
	if err != nil {
		return nil, fmt.Errorf("raftlog: marshal snapshot: %w", err)
	}
	return binary.LittleEndian.AppendUint32(b, crc32Checksum(b)), nil
}

func crc32Checksum(b []byte) uint32 { return frameCRC(nil, b) }

func decodeSnapshot(b []byte) (*pb.Snapshot, error) {
	if len(b) < len(snapMagic)+1+4 || string(b[:len(snapMagic)]) != snapMagic {
		return nil, fmt.Errorf("%w: bad snapshot header", ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32Checksum(body) != sum {
		return nil, fmt.Errorf("%w: snapshot checksum mismatch", ErrCorrupt)
	}
	if v := b[len(snapMagic)]; v != snapVersion {
		return nil, fmt.Errorf("%w: snapshot version %d", ErrUnsupportedVersion, v)
	}
	snap := &pb.Snapshot{}
	if err := proto.Unmarshal(body[len(snapMagic)+1:], snap); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	md := snap.GetMetadata()
	if md == nil || md.Index == nil || md.Term == nil {
		return nil, fmt.Errorf("%w: snapshot without metadata", ErrCorrupt)
	}
	return pb.EnsureSnapshot(snap), nil
}

// writeSnapshotFile makes snap durable under its final name
// (vfs.WriteFileAtomic: write to name.tmp, fsync, rename, fsync the
// directory). A crash at any point leaves
// either no .snap file (and maybe a .tmp that Open removes) or a whole one.
func writeSnapshotFile(fs vfs.FS, dir string, snap *pb.Snapshot) (snapInfo, error) {
	b, err := encodeSnapshot(snap)
	if err != nil {
		return snapInfo{}, err
	}
	md := snap.GetMetadata()
	name := snapName(md.GetTerm(), md.GetIndex())
	final := joinDir(dir, name)
	if err := vfs.WriteFileAtomic(fs, final, b); err != nil {
		return snapInfo{}, fmt.Errorf("raftlog: %w", err)
	}
	return snapInfo{name: name, term: md.GetTerm(), index: md.GetIndex(), size: int64(len(b)), time: time.Now()}, nil
}

// readFile reads a whole file.
func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return b, nil
}

// readSnapshotFile loads and verifies one snapshot file.
func readSnapshotFile(fs vfs.FS, dir string, si snapInfo) (*pb.Snapshot, error) {
	b, err := readFile(fs, joinDir(dir, si.name))
	if err != nil {
		return nil, fmt.Errorf("raftlog: read %s: %w", si.name, err)
	}
	snap, err := decodeSnapshot(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", si.name, err)
	}
	if md := snap.GetMetadata(); md.GetIndex() != si.index || md.GetTerm() != si.term {
		return nil, fmt.Errorf("%w: %s holds snapshot %d/%d", ErrCorrupt, si.name, md.GetTerm(), md.GetIndex())
	}
	return snap, nil
}
