package storage

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/vfs"
)

// op is one keyed write: a put of value, or (del) a tombstone.
type op struct {
	key, value string
	del        bool
}

// producerIDs stamps batches with an idempotent producer's id and sequence.
type producerIDs struct {
	id    int64
	epoch int16
	seq   int32
}

// keyedBatch builds a valid v2 batch of ops (record i at ts+i) compressed
// with codec, through batch.Builder so every codec is covered.
func keyedBatch(tb testing.TB, ops []op, ts int64, codec batch.Codec, p *producerIDs) []byte {
	tb.Helper()
	h := batch.Header{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(len(ops) - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(len(ops)-1), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}
	if p != nil {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = p.id, p.epoch, p.seq
		p.seq += int32(len(ops))
	}
	bl := batch.NewBuilder(h)
	for i, o := range ops {
		r := batch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(o.key)}
		if o.del {
			r.ValueNull = true
		} else {
			r.Value = []byte(o.value)
		}
		bl.Add(r)
	}
	b, err := bl.AppendTo(nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := batch.Validate(b, batch.Limits{SkipTimestampCheck: true}); err != nil {
		tb.Fatalf("test batch invalid: %v", err)
	}
	return b
}

// newCompactEnv is newEnv with cleanup.policy=compact and small segments.
func newCompactEnv(tb testing.TB, fs vfs.FS, mods ...func(*Config)) *testEnv {
	tb.Helper()
	all := append([]func(*Config){func(c *Config) {
		c.CleanupPolicy = "compact"
		c.SegmentBytes = 2048
		c.SegmentIndexBytes = 4096 // small segments: small indexes keep -race fast
		c.DeleteRetentionMs = time.Hour.Milliseconds()
		c.MinCleanableDirtyRatio = 0.01
		c.MaxCompactionLagMs = 1<<63 - 1
	}}, mods...)
	if fs == nil {
		fs = vfs.NewMem()
	}
	return newEnvFS(tb, fs, "/data/t-0", all...)
}

// put appends one batch of ops as the leader and returns the first offset.
func (e *testEnv) put(ops []op, codec batch.Codec, p *producerIDs) int64 {
	e.tb.Helper()
	info, err := e.log.Append(keyedBatch(e.tb, ops, e.clock.Now().UnixMilli(), codec, p), AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
	if err != nil {
		e.tb.Fatalf("Append: %v", err)
	}
	// One replica: the high watermark follows the log end (the cleaner
	// never cleans past it).
	e.log.SetHighWatermark(e.log.LogEndOffset())
	return info.FirstOffset
}

// cleanNow runs one cleaning of the log from firstDirty at the env's clock.
func (e *testEnv) cleanNow(firstDirty int64) cleanResult {
	e.tb.Helper()
	e.log.SetHighWatermark(e.log.LogEndOffset())
	res, err := e.log.clean(cleanParams{firstDirty: firstDirty, now: e.clock.Now(), dedupeBytes: 1 << 20})
	if err != nil {
		e.tb.Fatalf("clean: %v", err)
	}
	return res
}

// logRecord is one record as a consumer reading the log sees it.
type logRecord struct {
	offset     int64
	key, value string
	del        bool
}

// readRecords reads the whole log through Read, decodes every record and
// checks offsets strictly increase.
func readRecords(tb testing.TB, l *Log) []logRecord {
	tb.Helper()
	all, _ := readAll(tb, l)
	var out []logRecord
	for rest := all; len(rest) > 0; {
		first, r, err := batch.Split(rest)
		if err != nil {
			tb.Fatal(err)
		}
		rest = r
		h, err := batch.CheckStored(first)
		if err != nil {
			tb.Fatalf("batch %d: %v", h.BaseOffset, err)
		}
		if h.NumRecords == 0 {
			continue // kept for its producer state, or to end a cleaned segment
		}
		if err := batch.Records(first, func(rec batch.Record) error {
			out = append(out, logRecord{offset: h.BaseOffset + int64(rec.OffsetDelta), key: string(rec.Key), value: string(rec.Value), del: rec.ValueNull})
			return nil
		}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 1; i < len(out); i++ {
		if out[i].offset <= out[i-1].offset {
			tb.Fatalf("offset %d after %d", out[i].offset, out[i-1].offset)
		}
	}
	return out
}

// latest folds records into key -> newest value (tombstones delete).
func latest(recs []logRecord) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		if r.del {
			delete(m, r.key)
		} else {
			m[r.key] = r.value
		}
	}
	return m
}

// sameMap fails unless got equals want, showing the first differences.
func sameMap(tb testing.TB, label string, got, want map[string]string) {
	tb.Helper()
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			diffs = append(diffs, fmt.Sprintf("%s: got %q (present %v) want %q", k, g, ok, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, want absent", k, v))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 8 {
			diffs = diffs[:8]
		}
		tb.Fatalf("%s: %d keys differ: %s", label, len(diffs), strings.Join(diffs, "; "))
	}
}

// randomWorkload drives puts and deletes over nkeys keys through e, with
// random codecs and rolls, and returns the model map.
func randomWorkload(e *testEnv, rng *rand.Rand, batches, nkeys int, model map[string]string) {
	codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}
	for range batches {
		n := 1 + rng.IntN(6)
		ops := make([]op, n)
		for i := range ops {
			k := fmt.Sprintf("key-%03d", rng.IntN(nkeys))
			if rng.IntN(6) == 0 {
				ops[i] = op{key: k, del: true}
				delete(model, k)
			} else {
				v := fmt.Sprintf("v%d-%s", rng.Uint64(), strings.Repeat("x", rng.IntN(40)))
				ops[i] = op{key: k, value: v}
				model[k] = v
			}
		}
		// Mostly uncompressed: codecs cost 100x under -race.
		codec := batch.CodecNone
		if rng.IntN(5) == 0 {
			codec = codecs[rng.IntN(len(codecs))]
		}
		e.put(ops, codec, nil)
		if rng.IntN(10) == 0 {
			if err := e.log.Roll(); err != nil {
				e.tb.Fatal(err)
			}
		}
		e.clock.Advance(time.Duration(rng.IntN(1000)) * time.Millisecond)
	}
}
