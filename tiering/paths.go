package tiering

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Every object key tiering writes is built here and nowhere else, so the
// bucket has one layout (redpanda's remote_path_provider is the model):
//
//	<prefix>/<topic>-<topicId>/<partition>/<base offset, 20 digits>-<segment uuid>.<ext>
//	<prefix>/<topic>-<topicId>/<partition>/manifest.json
//
// for example
//
//	strata/orders-0f8fad5b-d9cb-469f-a165-70867728950e/3/00000000000000123456-7c9e6679-7425-40de-944b-e07fc1f90ae7.log
//
//   - The prefix may be empty: the key then starts at the topic directory
//     (never with '/'). Slashes around a configured prefix are dropped.
//   - The topic id makes the topic directory unambiguous even though a
//     Kafka topic name may itself contain '-' ("a-b" with id X never
//     collides with "a" with id "b-..."): the id is always the last 36
//     characters, in canonical lower-case form.
//   - The partition is plain decimal; the base offset is zero-padded to 20
//     digits (the width of the largest int64), so a listing of a partition
//     comes back in offset order.
//   - The segment uuid makes every upload's keys new: a retried or
//     repeated upload of the same offsets never overwrites a finished one.

// Segment object extensions: the files uploaded for one segment.
const (
	ExtLog       = "log"       // record batches, as on disk
	ExtIndex     = "index"     // sparse offset index
	ExtTimeIndex = "timeindex" // sparse time index
	ExtSnapshot  = "snapshot"  // producer-state snapshot at the segment's end
	ExtEpochs    = "epochs"    // leader-epoch entries covering the segment
	ExtTxnIndex  = "txnindex"  // aborted-transaction index (storage/txnindex.go), empty when none
	// ExtMeta is the packed metadata object (pack.go): the five files
	// above but the .log in one object, a segment's only other object
	// since issue 20.
	ExtMeta = "meta"
)

// SegmentExts lists the extensions of a segment archived before packing
// (issue 20), in upload order. A segment uploaded before transactions
// (issue 16) has no .txnindex object: its manifest entry records size 0,
// and a missing zero-size .txnindex is no problem for verification and
// restore (txnIndexOptional).
var SegmentExts = []string{ExtLog, ExtIndex, ExtTimeIndex, ExtSnapshot, ExtEpochs, ExtTxnIndex}

// PackedSegmentExts lists the objects of a segment archived packed: its
// .log and its .meta.
var PackedSegmentExts = []string{ExtLog, ExtMeta}

// allSegmentExts is every extension a segment object may have, in either
// layout: what deleting a segment removes (deleting a missing key is no
// error), what ParseSegmentKey accepts.
var allSegmentExts = append(append([]string(nil), SegmentExts...), ExtMeta)

// segmentObjects returns the extensions of the objects a segment whose
// manifest entry has these file sizes must have: packed when the entry
// records a .meta.
func segmentObjects(f FileSizes) []string {
	if f.Meta > 0 {
		return PackedSegmentExts
	}
	return SegmentExts
}

// txnIndexOptional reports whether a missing object of extension ext,
// recorded with size want, is expected: a .txnindex of size 0 (none, or a
// segment uploaded before transactions existed).
func txnIndexOptional(ext string, want int64) bool { return ext == ExtTxnIndex && want <= 0 }

// ManifestName is the final key segment of a partition's manifest.
const ManifestName = "manifest.json"

const (
	offsetWidth = 20 // digits of a zero-padded base offset
	uuidWidth   = 36 // canonical "8-4-4-4-12" form
)

// ErrInvalidSegmentKey is returned by [ParseSegmentKey] for a key that
// [SegmentKey] cannot have built.
var ErrInvalidSegmentKey = errors.New("tiering: invalid segment key")

// SegmentKeyInfo is what a segment key says; [ParseSegmentKey] returns it
// and [SegmentKeyInfo.Key] builds the key back.
type SegmentKeyInfo struct {
	Prefix     string // without surrounding slashes; "" for none
	Topic      string
	TopicID    uuid.UUID
	Partition  int32
	BaseOffset int64
	SegmentID  uuid.UUID
	Ext        string // one of [SegmentExts]
}

// Key returns the key described by i (see [SegmentKey]).
func (i SegmentKeyInfo) Key() string {
	return SegmentKey(i.Prefix, i.Topic, i.TopicID, i.Partition, i.BaseOffset, i.SegmentID, i.Ext)
}

// TopicPrefix returns the key prefix, ending in '/', under which every
// object of one topic incarnation lies: deleting a topic deletes what a
// List of it returns.
func TopicPrefix(prefix, topic string, topicID uuid.UUID) string {
	var b strings.Builder
	writeTopicDir(&b, prefix, topic, topicID)
	b.WriteByte('/')
	return b.String()
}

// PartitionPrefix returns the key prefix, ending in '/', under which every
// object of one partition lies. The trailing slash keeps partition 1's
// listing from including partition 10's objects.
func PartitionPrefix(prefix, topic string, topicID uuid.UUID, partition int32) string {
	var b strings.Builder
	writePartitionDir(&b, prefix, topic, topicID, partition)
	b.WriteByte('/')
	return b.String()
}

// ManifestKey returns the key of a partition's manifest object.
func ManifestKey(prefix, topic string, topicID uuid.UUID, partition int32) string {
	var b strings.Builder
	writePartitionDir(&b, prefix, topic, topicID, partition)
	b.WriteByte('/')
	b.WriteString(ManifestName)
	return b.String()
}

// SegmentKey returns the key of one file of a remote segment. topic must
// be a legal Kafka topic name (letters, digits, '.', '_', '-'; the broker
// refuses any other at creation), partition and baseOffset must not be
// negative, and ext must be one of [SegmentExts] or [ExtMeta]; for such arguments the
// key passes objstore.CheckKey and [ParseSegmentKey] returns them back.
func SegmentKey(prefix, topic string, topicID uuid.UUID, partition int32, baseOffset int64, segmentID uuid.UUID, ext string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(topic) + 2*uuidWidth + offsetWidth + 24)
	writePartitionDir(&b, prefix, topic, topicID, partition)
	b.WriteByte('/')
	var num [offsetWidth]byte
	s := strconv.AppendInt(num[:0], baseOffset, 10)
	for range offsetWidth - len(s) {
		b.WriteByte('0')
	}
	b.Write(s)
	b.WriteByte('-')
	b.WriteString(segmentID.String())
	b.WriteByte('.')
	b.WriteString(ext)
	return b.String()
}

func writeTopicDir(b *strings.Builder, prefix, topic string, topicID uuid.UUID) {
	if p := strings.Trim(prefix, "/"); p != "" {
		b.WriteString(p)
		b.WriteByte('/')
	}
	b.WriteString(topic)
	b.WriteByte('-')
	b.WriteString(topicID.String())
}

func writePartitionDir(b *strings.Builder, prefix, topic string, topicID uuid.UUID, partition int32) {
	writeTopicDir(b, prefix, topic, topicID)
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(int64(partition), 10))
}

// ParseSegmentKey parses a key built by [SegmentKey]. It is strict: any
// key SegmentKey could not have built for legal arguments (a padded or
// negative partition, an offset not of exactly 20 digits, a non-canonical
// uuid, an unknown extension, an illegal topic name) returns an error
// wrapping [ErrInvalidSegmentKey]. Keys of other objects under a
// partition prefix (the manifest) are refused too, so a listing can be
// split into segment files and the rest.
func ParseSegmentKey(key string) (SegmentKeyInfo, error) {
	bad := func(why string) (SegmentKeyInfo, error) {
		return SegmentKeyInfo{}, fmt.Errorf("%w: %s: %q", ErrInvalidSegmentKey, why, key)
	}
	var info SegmentKeyInfo

	// Split off the last three segments: topic dir, partition, file.
	rest := key
	var parts [3]string
	for i := 2; i >= 0; i-- {
		j := strings.LastIndexByte(rest, '/')
		if i > 0 && j < 0 {
			return bad("too few segments")
		}
		if i == 0 && j < 0 {
			parts[0], rest = rest, ""
			break
		}
		parts[i], rest = rest[j+1:], rest[:j]
		if i == 0 {
			if rest == "" {
				return bad("empty prefix segment")
			}
			info.Prefix = rest
		}
	}
	if info.Prefix != "" {
		for seg := range strings.SplitSeq(info.Prefix, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsRune(seg, 0) {
				return bad("bad prefix")
			}
		}
	}

	// <topic>-<topicId>
	dir := parts[0]
	if len(dir) < uuidWidth+2 || dir[len(dir)-uuidWidth-1] != '-' {
		return bad("topic directory")
	}
	info.Topic = dir[:len(dir)-uuidWidth-1]
	if !validTopicName(info.Topic) {
		return bad("topic name")
	}
	var ok bool
	if info.TopicID, ok = parseCanonicalUUID(dir[len(dir)-uuidWidth:]); !ok {
		return bad("topic id")
	}

	// <partition>
	p := parts[1]
	if p == "" || (len(p) > 1 && p[0] == '0') || !allDigits(p) {
		return bad("partition")
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return bad("partition")
	}
	info.Partition = int32(n)

	// <20-digit base offset>-<segment uuid>.<ext>
	f := parts[2]
	if len(f) < offsetWidth+1+uuidWidth+2 || f[offsetWidth] != '-' || f[offsetWidth+1+uuidWidth] != '.' {
		return bad("segment file name")
	}
	if !allDigits(f[:offsetWidth]) {
		return bad("base offset")
	}
	if info.BaseOffset, err = strconv.ParseInt(f[:offsetWidth], 10, 64); err != nil {
		return bad("base offset")
	}
	if info.SegmentID, ok = parseCanonicalUUID(f[offsetWidth+1 : offsetWidth+1+uuidWidth]); !ok {
		return bad("segment id")
	}
	info.Ext = f[offsetWidth+1+uuidWidth+1:]
	if !validExt(info.Ext) {
		return bad("extension")
	}
	return info, nil
}

func validExt(ext string) bool {
	for _, e := range allSegmentExts {
		if ext == e {
			return true
		}
	}
	return false
}

// parseCanonicalUUID accepts only the lower-case hyphenated form
// uuid.UUID.String produces, so a key has one spelling.
func parseCanonicalUUID(s string) (uuid.UUID, bool) {
	if len(s) != uuidWidth {
		return uuid.UUID{}, false
	}
	id, err := uuid.Parse(s)
	if err != nil || id.String() != s {
		return uuid.UUID{}, false
	}
	return id, true
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxTopicNameLen is Kafka's limit on a topic name's length.
const maxTopicNameLen = 249

// validTopicName reports whether name is a legal Kafka topic name:
// 1 to 249 of [a-zA-Z0-9._-], and neither "." nor "..".
func validTopicName(name string) bool {
	if name == "" || len(name) > maxTopicNameLen || name == "." || name == ".." {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
