package storage

import (
	"bytes"
	"testing"
)

func TestLogAppendReadRoundTripIsByteExact(t *testing.T) {
	e := newEnv(t)
	var want []byte
	for i := 0; i < 50; i++ {
		b := makeBatch(t, 1+i%5, 100, baseTs+int64(i))
		info, err := e.log.Append(b, AppendOptions{LeaderEpoch: 3, AssignOffsets: true})
		if err != nil {
			t.Fatal(err)
		}
		if info.FirstOffset != int64(len(want)) && i == 0 {
			t.Fatalf("first offset %d", info.FirstOffset)
		}
		want = append(want, b...) // b was patched in place: this is what the log holds
	}
	got, hdrs := readAll(t, e.log)
	if !bytes.Equal(got, want) {
		t.Fatalf("read bytes differ from appended bytes (%d vs %d)", len(got), len(want))
	}
	next := int64(0)
	for _, h := range hdrs {
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, want dense offset %d", h.BaseOffset, next)
		}
		if h.PartitionLeaderEpoch != 3 {
			t.Fatalf("epoch %d, want 3", h.PartitionLeaderEpoch)
		}
		next = h.LastOffset() + 1
	}
	if e.log.LogEndOffset() != next {
		t.Fatalf("LEO %d, want %d", e.log.LogEndOffset(), next)
	}
	e.reopen()
	got2, _ := readAll(t, e.log)
	if !bytes.Equal(got2, want) {
		t.Fatal("bytes differ after reopen")
	}
}
