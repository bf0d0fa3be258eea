package tiering

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/strata-io/strata/tiering/objstore"
)

// The packed metadata object (.meta): a segment's offset index, time
// index, producer snapshot, leader epochs and transaction index in ONE
// object next to its .log, so archiving a segment is two objects, not
// six. Segments archived before it have the five separate objects; every
// reader falls back to them when a segment has no .meta.
//
// Layout (big-endian), the directory first so a reader fetches it with
// one ranged GET of its first packHeaderMax bytes, then any section with
// one ranged GET of exactly its bytes:
//
//	magic    4 bytes  "STPK"
//	version  uint16   packVersion (1)
//	count    uint16   sections
//	count ×  kind uint8 (packKind*), offset uint64, length uint64, crc32c uint32
//	crc      uint32   crc32c of everything before it
//	sections, in directory order, back to back
//
// A reader refuses another magic or version, a directory whose crc does
// not match, or a section outside the object; it skips kinds it does not
// know (a later version may add some), and checks each section's crc32c.

const (
	packMagic   = "STPK"
	packVersion = 1
	// packEntrySize is one directory entry's bytes.
	packEntrySize = 1 + 8 + 8 + 4
	// packHeaderMax is what a reader asks for to get the directory: room
	// for 8 sections, cut at the object's end by the store.
	packHeaderMax = 4 + 2 + 2 + 8*packEntrySize + 4
	// packHeadRead is what the remote reader asks for instead: the
	// directory and, for a small segment, its first sections (the offset
	// index first), so one GET serves both.
	packHeadRead = 64 << 10
)

// dirLen returns the bytes of a packed object's directory, crc included.
func (d packDir) dirLen() int { return 8 + len(d.sections)*packEntrySize + 4 }

// Section kinds of a packed object, one per extension it replaces.
const (
	packKindIndex     = 1
	packKindTimeIndex = 2
	packKindSnapshot  = 3
	packKindEpochs    = 4
	packKindTxnIndex  = 5
)

// packKinds maps each packed extension to its kind, in section order.
var packKinds = []struct {
	ext  string
	kind uint8
}{
	{ExtIndex, packKindIndex},
	{ExtTimeIndex, packKindTimeIndex},
	{ExtSnapshot, packKindSnapshot},
	{ExtEpochs, packKindEpochs},
	{ExtTxnIndex, packKindTxnIndex},
}

func packKind(ext string) (uint8, bool) {
	for _, k := range packKinds {
		if k.ext == ext {
			return k.kind, true
		}
	}
	return 0, false
}

// ErrCorruptPack is returned for a .meta object that does not decode.
var ErrCorruptPack = errors.New("tiering: corrupt packed segment metadata")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packSection is one section of a packed object.
type packSection struct {
	kind        uint8
	off, length int64
	crc         uint32
}

// packDir is a packed object's directory.
type packDir struct {
	sections []packSection
}

// find returns the section of ext, if the object holds one.
func (d packDir) find(ext string) (packSection, bool) {
	kind, ok := packKind(ext)
	if !ok {
		return packSection{}, false
	}
	for _, s := range d.sections {
		if s.kind == kind {
			return s, true
		}
	}
	return packSection{}, false
}

// encodePack builds a packed object from the bytes of each packed
// extension (a missing extension is an empty section).
func encodePack(data map[string][]byte) []byte {
	n := len(packKinds)
	hdr := 4 + 2 + 2 + n*packEntrySize + 4
	total := hdr
	for _, k := range packKinds {
		total += len(data[k.ext])
	}
	b := make([]byte, 0, total)
	b = append(b, packMagic...)
	b = binary.BigEndian.AppendUint16(b, packVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	off := int64(hdr)
	for _, k := range packKinds {
		d := data[k.ext]
		b = append(b, k.kind)
		b = binary.BigEndian.AppendUint64(b, uint64(off))
		b = binary.BigEndian.AppendUint64(b, uint64(len(d)))
		b = binary.BigEndian.AppendUint32(b, crc32.Checksum(d, castagnoli))
		off += int64(len(d))
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	for _, k := range packKinds {
		b = append(b, data[k.ext]...)
	}
	return b
}

// decodePackDir parses the directory at the start of a packed object of
// size bytes from head, its first bytes (at least the directory).
func decodePackDir(head []byte, size int64) (packDir, error) {
	bad := func(why string) (packDir, error) {
		return packDir{}, fmt.Errorf("%w: %s", ErrCorruptPack, why)
	}
	if len(head) < 8 || string(head[:4]) != packMagic {
		return bad("magic")
	}
	if v := binary.BigEndian.Uint16(head[4:]); v != packVersion {
		return bad(fmt.Sprintf("version %d", v))
	}
	n := int(binary.BigEndian.Uint16(head[6:]))
	end := 8 + n*packEntrySize
	if len(head) < end+4 {
		return bad("short directory")
	}
	if crc32.Checksum(head[:end], castagnoli) != binary.BigEndian.Uint32(head[end:]) {
		return bad("directory checksum")
	}
	d := packDir{sections: make([]packSection, 0, n)}
	for i := range n {
		e := head[8+i*packEntrySize:]
		s := packSection{
			kind:   e[0],
			off:    int64(binary.BigEndian.Uint64(e[1:])),
			length: int64(binary.BigEndian.Uint64(e[9:])),
			crc:    binary.BigEndian.Uint32(e[17:]),
		}
		if s.off < int64(end+4) || s.length < 0 || s.off > size || s.length > size-s.off {
			return bad(fmt.Sprintf("section %d outside the object", s.kind))
		}
		d.sections = append(d.sections, s)
	}
	return d, nil
}

// decodePack parses a whole packed object into the bytes of each
// extension it holds, checking every section's crc.
func decodePack(b []byte) (map[string][]byte, error) {
	d, err := decodePackDir(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, k := range packKinds {
		s, ok := d.find(k.ext)
		if !ok {
			continue
		}
		sec := b[s.off : s.off+s.length]
		if crc32.Checksum(sec, castagnoli) != s.crc {
			return nil, fmt.Errorf("%w: .%s section checksum", ErrCorruptPack, k.ext)
		}
		out[k.ext] = sec
	}
	return out, nil
}

// readPackDir reads the directory of the packed object at key: one
// ranged GET. A missing object is objstore.ErrNotFound (a segment
// archived before packing).
func readPackDir(ctx context.Context, store objstore.ObjectStore, key string) (packDir, error) {
	head, err := getRange(ctx, store, key, 0, packHeaderMax)
	if err != nil {
		return packDir{}, err
	}
	// The directory says where sections lie; bound them by what the
	// object can hold (its sections are checked by crc when read).
	return decodePackDir(head, 1<<62)
}

// readPackSection reads section ext of the packed object at key with
// one ranged GET, checking its crc. ok is false when the object has no
// such section.
func readPackSection(ctx context.Context, store objstore.ObjectStore, key string, d packDir, ext string) ([]byte, bool, error) {
	s, ok := d.find(ext)
	if !ok {
		return nil, false, nil
	}
	if s.length == 0 {
		return []byte{}, true, nil
	}
	b, err := getRange(ctx, store, key, s.off, s.length)
	if err != nil {
		return nil, true, err
	}
	if int64(len(b)) != s.length {
		return nil, true, fmt.Errorf("%w: %s: .%s section cut short (%d of %d bytes)", ErrCorruptPack, key, ext, len(b), s.length)
	}
	if crc32.Checksum(b, castagnoli) != s.crc {
		return nil, true, fmt.Errorf("%w: %s: .%s section checksum", ErrCorruptPack, key, ext)
	}
	return b, true, nil
}

func getRange(ctx context.Context, store objstore.ObjectStore, key string, off, length int64) ([]byte, error) {
	rc, err := store.Get(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, length))
	if err != nil {
		return nil, fmt.Errorf("tiering: get %s: %w", key, err)
	}
	return b, nil
}

// ReadSegmentFile returns the bytes of one of segment seg's metadata
// files (ExtIndex, ExtTimeIndex, ExtSnapshot, ExtEpochs, ExtTxnIndex):
// from its packed .meta object by two ranged GETs, or, for a segment
// archived before packing (no .meta), from its own object. store is
// already under prefix's keys as Key(prefix, ...) builds them.
func ReadSegmentFile(ctx context.Context, store objstore.ObjectStore, prefix string, seg RemoteSegment, ext string) ([]byte, error) {
	if _, ok := packKind(ext); !ok {
		return nil, fmt.Errorf("tiering: .%s is not a packed extension", ext)
	}
	d, err := readPackDir(ctx, store, seg.Key(prefix, ExtMeta))
	switch {
	case err == nil:
		b, ok, err := readPackSection(ctx, store, seg.Key(prefix, ExtMeta), d, ext)
		if err != nil {
			return nil, err
		}
		if !ok {
			return []byte{}, nil
		}
		return b, nil
	case !errors.Is(err, objstore.ErrNotFound):
		return nil, err
	}
	rc, err := store.Get(ctx, seg.Key(prefix, ext), 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
