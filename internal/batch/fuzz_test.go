package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaCodes are the only Kafka errors this package may return.
var kafkaCodes = []*kerr.Error{
	kerr.CorruptMessage, kerr.InvalidRecord, kerr.MessageTooLarge,
	kerr.UnsupportedForMessageFormat, kerr.InvalidTimestamp, kerr.UnsupportedCompressionType,
}

func hasKafkaCode(err error) bool {
	for _, c := range kafkaCodes {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// fuzzSeeds are valid batches of every codec plus broken ones. Each is
// added with fix=false and fix=true.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for i, v := range variants {
		seeds = append(seeds, newBatch(f, v, testRecords(1+i, 8, uint64(i))))
		seeds = append(seeds, newBatch(f, v, testRecords(3, 0, uint64(i)), func(rb *kmsg.RecordBatch) {
			rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence, rb.Attributes = 9, 1, 0, rb.Attributes|0x10
		}))
	}
	good := newBatch(f, variants[0], testRecords(4, 4, 99))
	seeds = append(seeds,
		nil,
		good[:HeaderSize],
		good[:len(good)-1],
		with(good, func(b []byte) { b[16] = 1 }),
		with(good, func(b []byte) { b[len(b)-1] ^= 0xff }),
		with(good, func(b []byte) { binary.BigEndian.PutUint32(b[57:], 5) }),
		with(good, func(b []byte) { b[22] |= 6 }),
		zstdSeed(f),
	)
	return seeds
}

// zstdSeed is a small zstd bomb, so the fuzzer starts next to the limit.
func zstdSeed(f *testing.F) []byte {
	return newBatchRaw(f, variants[0], []kmsg.Record{{}}, zstdRLEFrame(5<<20, true), func(rb *kmsg.RecordBatch) {
		rb.Attributes = int16(CodecZstd)
	})
}

// FuzzValidate feeds arbitrary bytes to Validate; when fix is set the CRC is
// recomputed first so the fuzzer gets past it into the records. Invariants:
//
//   - Validate never panics and never modifies b;
//   - every error wraps one of the Kafka codes in kafkaCodes;
//   - an accepted batch has Size() == len(b) and a matching CRC-32C, and
//     Records iterates exactly NumRecords records with offset deltas
//     0..NumRecords-1, without error;
//   - SetBaseOffset on an accepted batch keeps it accepted.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix && len(b) >= HeaderSize {
			fixCRC(b)
		}
		orig := bytes.Clone(b)
		h, err := Validate(b, noLimits)
		if !bytes.Equal(b, orig) {
			t.Fatal("Validate modified its input")
		}
		if err != nil {
			if !hasKafkaCode(err) {
				t.Fatalf("error without a Kafka code: %v", err)
			}
			return
		}
		if h.Size() != len(b) {
			t.Fatalf("accepted batch of Size %d in %d bytes", h.Size(), len(b))
		}
		if Checksum(b) != h.CRC || crcOf(b) != h.CRC {
			t.Fatalf("accepted batch with CRC %08x, computed %08x", h.CRC, Checksum(b))
		}
		var n int32
		err = Records(b, func(r Record) error {
			if r.OffsetDelta != n {
				t.Fatalf("record %d has offset delta %d", n, r.OffsetDelta)
			}
			n++
			return nil
		})
		if err != nil || n != h.NumRecords {
			t.Fatalf("Records on an accepted batch: %d of %d records, %v", n, h.NumRecords, err)
		}
		SetBaseOffset(b, 1<<50)
		if _, err := Validate(b, noLimits); err != nil {
			t.Fatalf("SetBaseOffset broke an accepted batch: %v", err)
		}
	})
}

// FuzzRecords feeds arbitrary bytes to Records (CRC recomputed when fix is
// set). Invariants: Records never panics; every error wraps a Kafka code;
// success means exactly NumRecords records were handed out; and whenever
// Validate accepts b, Records succeeds too.
func FuzzRecords(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix && len(b) >= HeaderSize {
			fixCRC(b)
		}
		var n int32
		err := Records(b, func(r Record) error {
			n++
			for _, h := range r.Headers {
				_ = h.Key + string(h.Value)
			}
			return nil
		})
		if err != nil && !hasKafkaCode(err) {
			t.Fatalf("error without a Kafka code: %v", err)
		}
		if err == nil {
			h, _ := ParseHeader(b)
			if n != h.NumRecords {
				t.Fatalf("%d records handed out, header says %d", n, h.NumRecords)
			}
		}
		if _, verr := Validate(b, noLimits); verr == nil && err != nil {
			t.Fatalf("Validate accepts what Records rejects: %v", err)
		}
	})
}
