package tiering

import "testing"

func BenchmarkSegmentKey(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = SegmentKey("strata", "orders", testTopicID, 3, int64(i), testSegID, ExtLog)
	}
}

func BenchmarkParseSegmentKey(b *testing.B) {
	key := SegmentKey("strata", "orders", testTopicID, 3, 123456, testSegID, ExtLog)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSegmentKey(key); err != nil {
			b.Fatal(err)
		}
	}
}

// A partition with 1000 remote segments (1 GiB at 1 MiB segments).
func benchManifest() Manifest {
	bases := make([]int64, 1000)
	for i := range bases {
		bases[i] = int64(i) * 100
	}
	return testManifest(bases...)
}

func BenchmarkManifestEncode1000Segments(b *testing.B) {
	m := benchManifest()
	data, _ := m.Encode()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeManifest1000Segments(b *testing.B) {
	m := benchManifest()
	data, _ := m.Encode()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeManifest(data); err != nil {
			b.Fatal(err)
		}
	}
}
