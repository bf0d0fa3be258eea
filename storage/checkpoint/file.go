package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/storage/vfs"
)

// ErrCorruptCheckpoint is wrapped by every read of a checkpoint file that is
// not in the expected format: an unknown version, a count that does not
// match the entries, a line that does not parse. The caller decides whether
// to fail or to fall back to recomputing (a full recovery).
var ErrCorruptCheckpoint = errors.New("checkpoint: corrupt checkpoint file")

// Version is the only checkpoint format version, the first line of every
// checkpoint file.
const Version = 0

// maxFileBytes bounds what a read accepts, so a garbage file of arbitrary
// size cannot make a read allocate without limit. 64 MiB holds about two
// million offset entries.
const maxFileBytes = 64 << 20

// File format (Kafka's CheckpointFile, text, '\n' line ends; readers also
// accept "\r\n"):
//
//	<version>\n          always 0
//	<count>\n            number of entry lines that follow
//	<entry>\n            count times; fields separated by one space
//
// Entry formats:
//
//	offsets:      <topic> <partition> <offset>    e.g. "orders 3 1234"
//	leader epoch: <epoch> <start offset>           e.g. "7 1234"
//
// A missing or empty file, or one holding only the version line, has no
// entries (Kafka reads them that way too).

// writeFile replaces path atomically with the checkpoint made of lines
// ([vfs.WriteFileAtomic]: write path.tmp, sync it, rename it over path,
// sync the directory). A crash at any point leaves the old file or the new
// one; a failed write leaves the old one and removes the temporary file
// when it can.
func writeFile(fs vfs.FS, path string, lines []string) error {
	var buf bytes.Buffer
	buf.WriteString(strconv.Itoa(Version))
	buf.WriteByte('\n')
	buf.WriteString(strconv.Itoa(len(lines)))
	buf.WriteByte('\n')
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}

	if err := vfs.WriteFileAtomic(fs, path, buf.Bytes()); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// readFile returns the entry lines of the checkpoint at path, each split
// into exactly fields fields. A missing file has none.
func readFile(fs vfs.FS, path string, fields int) ([][]string, error) {
	f, err := fs.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	cerr := f.Close()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", path, err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("checkpoint: close %s: %w", path, cerr)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrCorruptCheckpoint, path, maxFileBytes)
	}
	return parse(path, data, fields)
}

// parse splits a checkpoint's bytes into entry lines of fields fields each.
func parse(path string, data []byte, fields int) ([][]string, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorruptCheckpoint, path, fmt.Sprintf(format, args...))
	}
	lines := splitLines(data)
	if len(lines) == 0 {
		return nil, nil
	}
	v, err := strconv.Atoi(lines[0])
	if err != nil {
		return nil, corrupt("bad version line %q", clip(lines[0]))
	}
	if v != Version {
		return nil, corrupt("unsupported version %d, want %d", v, Version)
	}
	if len(lines) == 1 {
		return nil, nil
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count < 0 {
		return nil, corrupt("bad count line %q", clip(lines[1]))
	}
	body := lines[2:]
	if len(body) != count {
		return nil, corrupt("count says %d entries, found %d", count, len(body))
	}
	out := make([][]string, len(body))
	for i, l := range body {
		fs := strings.Fields(l)
		if len(fs) != fields {
			return nil, corrupt("line %d %q: want %d fields", i+3, clip(l), fields)
		}
		out[i] = fs
	}
	return out, nil
}

// splitLines splits at '\n', drops a '\r' before it, and drops the empty
// remainder after a final line end (as Java's readLine does).
func splitLines(data []byte) []string {
	s := string(data)
	s = strings.TrimSuffix(s, "\n")
	if s == "" && len(data) == 0 {
		return nil
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// WriteOffsets atomically replaces the offsets checkpoint at path (Kafka's
// recovery-point-offset-checkpoint and log-start-offset-checkpoint format)
// with m, one "<topic> <partition> <offset>" line per entry, sorted by
// topic and partition. A topic that could not be read back (empty, or
// holding white space) is refused before anything is written.
func WriteOffsets(fs vfs.FS, path string, m map[TopicPartition]int64) error {
	tps := make([]TopicPartition, 0, len(m))
	for tp := range m {
		if tp.Topic == "" || strings.ContainsFunc(tp.Topic, isSpace) {
			return fmt.Errorf("checkpoint: write %s: topic name %q cannot be written", path, tp.Topic)
		}
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	lines := make([]string, len(tps))
	for i, tp := range tps {
		lines[i] = tp.Topic + " " + strconv.FormatInt(int64(tp.Partition), 10) + " " + strconv.FormatInt(m[tp], 10)
	}
	return writeFile(fs, path, lines)
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// ReadOffsets reads an offsets checkpoint written by WriteOffsets (or by
// Kafka). A missing file gives an empty map and nil; a malformed one an
// error wrapping ErrCorruptCheckpoint. A partition listed twice takes its
// last line's offset.
func ReadOffsets(fs vfs.FS, path string) (map[TopicPartition]int64, error) {
	lines, err := readFile(fs, path, 3)
	if err != nil {
		return nil, err
	}
	m := make(map[TopicPartition]int64, len(lines))
	for i, l := range lines {
		p, err1 := strconv.ParseInt(l[1], 10, 32)
		off, err2 := strconv.ParseInt(l[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: %s: entry %d %q: bad number", ErrCorruptCheckpoint, path, i, clip(strings.Join(l, " ")))
		}
		m[TopicPartition{Topic: l[0], Partition: int32(p)}] = off
	}
	return m, nil
}
