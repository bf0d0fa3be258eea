package storage

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"
)

// FuzzAppend feeds arbitrary record sets to Log.Append, which validates
// them with batch.Validate before anything touches disk. Invariants:
//
//   - Append never panics;
//   - a rejected set leaves the log exactly as it was (size, log end
//     offset) and its error maps to a Kafka code (CorruptMessage,
//     InvalidRecord, MessageTooLarge, InvalidTimestamp,
//     UnsupportedForMessageFormat, UnsupportedCompressionType,
//     RecordListTooLarge);
//   - an accepted set is read back byte for byte (with the offsets the log
//     assigned), every batch in it passes batch.Validate, and its offsets
//     continue the log densely;
//   - the log reopens (unclean, full rescan) to the same end offset.
//
// The seed corpus (valid sets, torn sets, flipped bytes, lying headers)
// runs in the normal test suite.
func FuzzAppend(f *testing.F) {
	one := makeBatch(f, 3, 20, baseTs)
	two := append(makeBatch(f, 1, 5, baseTs), makeBatch(f, 4, 0, baseTs+7)...)
	f.Add(one)
	f.Add(two)
	f.Add(one[:len(one)-1])
	f.Add(one[:batch.HeaderSize])
	f.Add([]byte{})
	f.Add(make([]byte, 80))
	for _, pos := range []int{8, 11, 16, 20, 23, 26, 57, 60, 61, 62, 70} {
		c := bytes.Clone(one)
		c[pos] ^= 0x5a
		f.Add(c)
		d := bytes.Clone(c)
		batch.SetBaseOffset(d, 0) // keep the flip, fix nothing else
		binPutCRC(d)
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, records []byte) {
		e := newEnv(t, func(c *Config) { c.MaxMessageBytes = 1 << 16; c.SegmentBytes = 1 << 20 })
		e.appendBatches(1, 2, 10)
		size, leo := e.log.Size(), e.log.LogEndOffset()
		in := bytes.Clone(records)
		info, err := e.log.Append(in, AppendOptions{LeaderEpoch: 2, AssignOffsets: true})
		if err != nil {
			if e.log.Size() != size || e.log.LogEndOffset() != leo {
				t.Fatalf("rejected append changed the log: %v", err)
			}
			codes := []error{kerr.CorruptMessage, kerr.InvalidRecord, kerr.MessageTooLarge, kerr.InvalidTimestamp,
				kerr.UnsupportedForMessageFormat, kerr.UnsupportedCompressionType, kerr.RecordListTooLarge}
			for _, c := range codes {
				if errors.Is(err, c) {
					return
				}
			}
			t.Fatalf("error maps to no Kafka code: %v", err)
		}
		if info.FirstOffset != leo || e.log.LogEndOffset() != info.LastOffset+1 {
			t.Fatalf("offsets %+v after LEO %d", info, leo)
		}
		v, err := e.log.Read(info.FirstOffset, math.MaxInt32, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Bytes()
		v.Release()
		if err != nil || !bytes.Equal(got, in) {
			t.Fatalf("read back differs: %v", err)
		}
		for rest := got; len(rest) > 0; {
			first, r, err := batch.Split(rest)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := batch.Validate(first, batch.Limits{SkipTimestampCheck: true}); err != nil {
				t.Fatalf("stored batch invalid: %v", err)
			}
			rest = r
		}
		end := e.log.LogEndOffset()
		e.log.Close()
		l := e.open(false, 0, 0)
		if l.LogEndOffset() != end || l.Recovery().TruncatedBytes != 0 {
			t.Fatalf("reopen: leo %d want %d, %+v", l.LogEndOffset(), end, l.Recovery())
		}
	})
}

// binPutCRC recomputes a batch's CRC after a test changed covered bytes.
func binPutCRC(b []byte) {
	if len(b) < batch.HeaderSize {
		return
	}
	c := batch.Checksum(b)
	b[17], b[18], b[19], b[20] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

// FuzzDecodeTxnIndex feeds arbitrary bytes to [DecodeTxnIndex], the
// reader of .txnindex files. Invariants:
//
//   - it never panics and allocates at most one entry per 34 input bytes;
//   - a rejected input's error wraps ErrCorruption;
//   - an accepted input is canonical: encoding the entries returns it byte
//     for byte, and the entries ascend by LastOffset with
//     FirstOffset <= LastOffset and LastStableOffset <= LastOffset + 1;
//   - the prefix reader recovery uses on an active segment's index
//     (decodeTxnIndexPrefix) returns a prefix of what it would accept,
//     and everything when DecodeTxnIndex accepts.
//
// The seed corpus is testdata/fuzz/FuzzDecodeTxnIndex plus the indexes
// added below.
func FuzzDecodeTxnIndex(f *testing.F) {
	two := encodeTxnIndex([]AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 4, LastStableOffset: 2}, {ProducerID: 3, FirstOffset: 5, LastOffset: 5, LastStableOffset: 2}})
	f.Add(two)
	f.Add(two[:txnEntrySize])
	f.Add(two[:txnEntrySize+7])
	f.Add([]byte{})
	f.Add(make([]byte, txnEntrySize))
	swapped := append(bytes.Clone(two[txnEntrySize:]), two[:txnEntrySize]...)
	f.Add(swapped)
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := DecodeTxnIndex(data)
		prefix, _ := decodeTxnIndexPrefix(data)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			if len(prefix)*txnEntrySize > len(data) {
				t.Fatalf("prefix of %d entries from %d bytes", len(prefix), len(data))
			}
			return
		}
		if !bytes.Equal(encodeTxnIndex(entries), data) {
			t.Fatal("accepted index is not canonical")
		}
		if len(prefix) != len(entries) {
			t.Fatalf("prefix reader returned %d of %d entries", len(prefix), len(entries))
		}
		for i, a := range entries {
			if a.FirstOffset > a.LastOffset || a.LastStableOffset > a.LastOffset+1 || (i > 0 && a.LastOffset <= entries[i-1].LastOffset) {
				t.Fatalf("entry %d inconsistent: %+v", i, a)
			}
		}
	})
}
