package tiering

import (
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

func TestSegmentKeyLayout(t *testing.T) {
	cases := []struct {
		prefix string
		part   int32
		base   int64
		ext    string
		want   string
	}{
		{"strata", 3, 123456, ExtLog,
			"strata/orders-0f8fad5b-d9cb-469f-a165-70867728950e/3/00000000000000123456-7c9e6679-7425-40de-944b-e07fc1f90ae7.log"},
		{"", 0, 0, ExtIndex,
			"orders-0f8fad5b-d9cb-469f-a165-70867728950e/0/00000000000000000000-7c9e6679-7425-40de-944b-e07fc1f90ae7.index"},
		{"/a/b/", 2147483647, math.MaxInt64, ExtEpochs,
			"a/b/orders-0f8fad5b-d9cb-469f-a165-70867728950e/2147483647/09223372036854775807-7c9e6679-7425-40de-944b-e07fc1f90ae7.epochs"},
	}
	for _, c := range cases {
		got := SegmentKey(c.prefix, "orders", testTopicID, c.part, c.base, testSegID, c.ext)
		if got != c.want {
			t.Errorf("SegmentKey(%q, %d, %d, %s)\n got %s\nwant %s", c.prefix, c.part, c.base, c.ext, got, c.want)
		}
		if err := objstore.CheckKey(got); err != nil {
			t.Errorf("CheckKey(%s): %v", got, err)
		}
	}
}

func TestPartitionPrefixManifestKeyAndTopicPrefixNest(t *testing.T) {
	for _, prefix := range []string{"", "p", "p/q"} {
		tp := TopicPrefix(prefix, "a.b", testTopicID)
		pp := PartitionPrefix(prefix, "a.b", testTopicID, 7)
		mk := ManifestKey(prefix, "a.b", testTopicID, 7)
		sk := SegmentKey(prefix, "a.b", testTopicID, 7, 42, testSegID, ExtSnapshot)
		if strings.HasPrefix(tp, "/") || !strings.HasSuffix(tp, "/") || !strings.HasSuffix(pp, "/") {
			t.Fatalf("prefix %q: topic prefix %q, partition prefix %q", prefix, tp, pp)
		}
		if !strings.HasPrefix(pp, tp) || !strings.HasPrefix(mk, pp) || !strings.HasPrefix(sk, pp) {
			t.Fatalf("prefix %q: keys do not nest: %q %q %q %q", prefix, tp, pp, mk, sk)
		}
		if mk != pp+"manifest.json" {
			t.Fatalf("ManifestKey = %q", mk)
		}
		if err := objstore.CheckKey(mk); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSegmentKey(mk); !errors.Is(err, ErrInvalidSegmentKey) {
			t.Fatalf("ParseSegmentKey(manifest) = %v, want ErrInvalidSegmentKey", err)
		}
	}
	// Partition 1's listing must not include partition 10's objects.
	if strings.HasPrefix(PartitionPrefix("", "t", testTopicID, 10), PartitionPrefix("", "t", testTopicID, 1)) {
		t.Fatal("partition 1's prefix is a prefix of partition 10's")
	}
}

func TestParseSegmentKeyRoundTripsEveryExt(t *testing.T) {
	for _, topic := range []string{"t", "orders", "a.b", "a_b", "a-b", "-", "a--b-", strings.Repeat("x", 249), "..."} {
		for _, ext := range SegmentExts {
			want := SegmentKeyInfo{Prefix: "tier/x", Topic: topic, TopicID: testTopicID, Partition: 12, BaseOffset: 987654321, SegmentID: testSegID, Ext: ext}
			got, err := ParseSegmentKey(want.Key())
			if err != nil {
				t.Fatalf("ParseSegmentKey(%s): %v", want.Key(), err)
			}
			if got != want {
				t.Fatalf("round trip of %s: got %+v, want %+v", want.Key(), got, want)
			}
		}
	}
}

// A topic name ending in what looks like a uuid and another topic whose
// id continues it still parse to their own names: the id is always the
// last 36 characters.
func TestParseSegmentKeyTopicWithDashesIsUnambiguous(t *testing.T) {
	idA := uuid.MustParse("11111111-2222-4333-8444-555555555555")
	k1 := SegmentKey("", "a-b", idA, 0, 0, testSegID, ExtLog)
	k2 := SegmentKey("", "a", idA, 0, 0, testSegID, ExtLog)
	if k1 == k2 {
		t.Fatal("different topics share a key")
	}
	for key, topic := range map[string]string{k1: "a-b", k2: "a"} {
		info, err := ParseSegmentKey(key)
		if err != nil || info.Topic != topic || info.TopicID != idA {
			t.Fatalf("ParseSegmentKey(%s) = %+v, %v; want topic %q", key, info, err, topic)
		}
	}
}

func TestParseSegmentKeyRejectsGarbage(t *testing.T) {
	good := SegmentKey("p", "t", testTopicID, 5, 77, testSegID, ExtLog)
	if _, err := ParseSegmentKey(good); err != nil {
		t.Fatalf("good key refused: %v", err)
	}
	tid, sid := testTopicID.String(), testSegID.String()
	bad := []string{
		"",
		"/",
		"manifest.json",
		"t-" + tid + "/5/manifest.json",
		"t-" + tid + "/5",
		"/t-" + tid + "/5/00000000000000000077-" + sid + ".log",                 // leading slash
		"p//t-" + tid + "/5/00000000000000000077-" + sid + ".log",               // empty prefix segment
		"../t-" + tid + "/5/00000000000000000077-" + sid + ".log",               // dot-dot prefix
		"t" + tid + "/5/00000000000000000077-" + sid + ".log",                   // no dash before the id
		"-" + tid + "/5/00000000000000000077-" + sid + ".log",                   // empty topic
		"t!-" + tid + "/5/00000000000000000077-" + sid + ".log",                 // illegal topic character
		"..-" + tid + "/5/00000000000000000077-" + sid + ".log",                 // topic ".."
		"t-" + strings.ToUpper(tid) + "/5/00000000000000000077-" + sid + ".log", // non-canonical id
		"t-{" + tid[:34] + "}/5/00000000000000000077-" + sid + ".log",
		"t-" + tid + "/05/00000000000000000077-" + sid + ".log", // padded partition
		"t-" + tid + "/-5/00000000000000000077-" + sid + ".log", // negative partition
		"t-" + tid + "/+5/00000000000000000077-" + sid + ".log",
		"t-" + tid + "/2147483648/00000000000000000077-" + sid + ".log", // partition over int32
		"t-" + tid + "//00000000000000000077-" + sid + ".log",
		"t-" + tid + "/5/0000000000000000077-" + sid + ".log",   // 19 digits
		"t-" + tid + "/5/000000000000000000077-" + sid + ".log", // 21 digits
		"t-" + tid + "/5/-0000000000000000077-" + sid + ".log",  // negative offset
		"t-" + tid + "/5/99999999999999999999-" + sid + ".log",  // offset over int64
		"t-" + tid + "/5/00000000000000000077_" + sid + ".log",
		"t-" + tid + "/5/00000000000000000077-" + sid + ".txt", // unknown ext
		"t-" + tid + "/5/00000000000000000077-" + sid + ".",
		"t-" + tid + "/5/00000000000000000077-" + sid,
		"t-" + tid + "/5/00000000000000000077-" + sid + ".log.tmp-1",
		"t-" + tid + "/5/00000000000000000077-" + sid[:35] + "x.log",
		"t-" + tid + "/5/00000000000000000077-" + strings.ReplaceAll(sid, "-", "") + "xxxx.log",
	}
	for _, k := range bad {
		if info, err := ParseSegmentKey(k); !errors.Is(err, ErrInvalidSegmentKey) {
			t.Errorf("ParseSegmentKey(%q) = %+v, %v; want ErrInvalidSegmentKey", k, info, err)
		}
	}
}

// Zero-padding makes a partition's listing come back in offset order.
func TestSegmentKeysSortInOffsetOrder(t *testing.T) {
	offsets := []int64{0, 9, 10, 99, 100, 1 << 20, 1<<31 + 5, 1 << 40, math.MaxInt64}
	var keys []string
	for i := len(offsets) - 1; i >= 0; i-- {
		keys = append(keys, SegmentKey("x", "t", testTopicID, 1, offsets[i], segUUID(offsets[i]), ExtLog))
	}
	sort.Strings(keys)
	var got []int64
	for _, k := range keys {
		info, err := ParseSegmentKey(k)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.BaseOffset)
	}
	if !slices.Equal(got, offsets) {
		t.Fatalf("sorted keys give offsets %v, want %v", got, offsets)
	}
}

// FuzzSegmentKeyRoundTrip checks, for any legal arguments, that the key
// passes objstore.CheckKey and parses back to exactly the arguments.
// Illegal topic names or negative numbers are skipped: the broker refuses
// them before a key is ever built.
func FuzzSegmentKeyRoundTrip(f *testing.F) {
	f.Add("strata", "orders", testTopicID[:], int32(3), int64(123456), testSegID[:], uint8(0))
	f.Add("", "a-b.c_d", testTopicID[:], int32(0), int64(0), testSegID[:], uint8(4))
	f.Add("/x/y/", "-", testTopicID[:], int32(math.MaxInt32), int64(math.MaxInt64), testSegID[:], uint8(2))
	f.Fuzz(func(t *testing.T, prefix, topic string, tid []byte, part int32, base int64, sid []byte, ext uint8) {
		if !validTopicName(topic) || part < 0 || base < 0 || len(tid) != 16 || len(sid) != 16 {
			t.Skip()
		}
		prefix = strings.Trim(prefix, "/")
		if prefix != "" && objstore.CheckKey(prefix) != nil {
			t.Skip()
		}
		want := SegmentKeyInfo{Prefix: prefix, Topic: topic, Partition: part, BaseOffset: base, Ext: SegmentExts[int(ext)%len(SegmentExts)]}
		copy(want.TopicID[:], tid)
		copy(want.SegmentID[:], sid)
		key := want.Key()
		if err := objstore.CheckKey(key); err != nil {
			t.Fatalf("key %q fails CheckKey: %v", key, err)
		}
		got, err := ParseSegmentKey(key)
		if err != nil {
			t.Fatalf("ParseSegmentKey(%q): %v", key, err)
		}
		if got != want {
			t.Fatalf("round trip of %q: got %+v, want %+v", key, got, want)
		}
	})
}

// FuzzParseSegmentKey checks that any string either fails with
// ErrInvalidSegmentKey or parses to info whose Key() is the same string
// (one spelling per key), without panicking.
func FuzzParseSegmentKey(f *testing.F) {
	f.Add(SegmentKey("p", "t", testTopicID, 5, 77, testSegID, ExtLog))
	f.Add(SegmentKey("", "a-b", testTopicID, 0, 0, testSegID, ExtTimeIndex))
	f.Add(ManifestKey("p", "t", testTopicID, 5))
	f.Add("a/b/c")
	f.Fuzz(func(t *testing.T, key string) {
		info, err := ParseSegmentKey(key)
		if err != nil {
			if !errors.Is(err, ErrInvalidSegmentKey) {
				t.Fatalf("error %v does not wrap ErrInvalidSegmentKey", err)
			}
			return
		}
		if got := info.Key(); got != key {
			t.Fatalf("ParseSegmentKey(%q).Key() = %q", key, got)
		}
		if err := objstore.CheckKey(key); err != nil {
			t.Fatalf("parsed key %q fails CheckKey: %v", key, err)
		}
	})
}
