package batch

import (
	"testing"
)

// benchBatch is a typical produce batch: 64 records with 16-byte keys' worth
// of key and 256-byte values, about 18 KiB uncompressed.
func benchBatch(b *testing.B, v variant) []byte {
	return newBatch(b, v, testRecords(64, 256, 42))
}

func BenchmarkValidate(b *testing.B) {
	lim := Limits{MaxBatchBytes: 1 << 20, Now: baseTs, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: 3600_000}
	for _, v := range variants {
		b.Run("codec="+v.name, func(b *testing.B) {
			batch := benchBatch(b, v)
			raw := encodeRecords(testRecords(64, 256, 42))
			// MB/s of uncompressed record data, comparable across codecs.
			b.SetBytes(int64(HeaderSize + len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(batch, lim); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(batch)), "batch-bytes")
		})
	}
}

func BenchmarkValidateLargeBatch(b *testing.B) {
	// 1 MiB uncompressed, franz-go's default maximum batch size.
	for _, v := range []variant{variants[0], variants[5]} {
		b.Run("codec="+v.name, func(b *testing.B) {
			recs := testRecords(1024, 1000, 43)
			batch := newBatch(b, v, recs)
			b.SetBytes(int64(HeaderSize + len(encodeRecords(recs))))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(batch, noLimits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecords(b *testing.B) {
	for _, v := range []variant{variants[0], variants[5]} {
		b.Run("codec="+v.name, func(b *testing.B) {
			batch := benchBatch(b, v)
			b.SetBytes(int64(HeaderSize + len(encodeRecords(testRecords(64, 256, 42)))))
			b.ReportAllocs()
			for b.Loop() {
				if err := Records(batch, func(Record) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSetLogAppendTime(b *testing.B) {
	batch := benchBatch(b, variants[0])
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		SetLogAppendTime(batch, baseTs)
	}
}
