package deliverycheck

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// Self-describing values, for a checker that is pointed at a cluster it
// does not trust: every value names its producer and sequence and carries
// a checksum of itself, so a reader can tell a value the cluster altered
// from one it never saw.
//
// The layout is "cccccccc producer seq[ pad]": eight lowercase hex
// digits of the CRC-32C (Castagnoli) of everything after the first space,
// the space, then the producer (no spaces in it), a space, the zero-padded
// decimal sequence and, when there is padding, a space and the padding.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeValue returns the self-describing value number seq of producer
// (which must hold no space), padded with pad.
func EncodeValue(producer string, seq int64, pad string) string {
	body := fmt.Sprintf("%s %08d", producer, seq)
	if pad != "" {
		body += " " + pad
	}
	return fmt.Sprintf("%08x %s", crc32.Checksum([]byte(body), castagnoli), body)
}

// ErrChecksum is wrapped by [VerifyValue] when a value's bytes are not
// the ones its producer wrote.
var ErrChecksum = errors.New("checksum mismatch")

// VerifyValue checks a value [EncodeValue] made: nil when its checksum
// matches, else an error wrapping [ErrChecksum].
func VerifyValue(v string) error {
	if len(v) < 10 || v[8] != ' ' {
		return fmt.Errorf("%w: not a self-describing value (%d bytes)", ErrChecksum, len(v))
	}
	want, err := strconv.ParseUint(v[:8], 16, 32)
	if err != nil {
		return fmt.Errorf("%w: checksum field %q", ErrChecksum, v[:8])
	}
	if got := crc32.Checksum([]byte(v[9:]), castagnoli); uint32(want) != got {
		return fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	return nil
}

// ParseValue verifies v ([VerifyValue]) and returns the producer and the
// sequence it names.
func ParseValue(v string) (producer string, seq int64, err error) {
	if err := VerifyValue(v); err != nil {
		return "", 0, err
	}
	f := strings.SplitN(v[9:], " ", 3)
	if len(f) < 2 {
		return "", 0, fmt.Errorf("%w: no producer and sequence in %q", ErrChecksum, v)
	}
	seq, err = strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: sequence %q", ErrChecksum, f[1])
	}
	return f[0], seq, nil
}
