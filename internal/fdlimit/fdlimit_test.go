package fdlimit

import "testing"

func TestPlanSplitsTheLimit(t *testing.T) {
	for _, c := range []struct {
		soft                         uint64
		reserved, sealed, partitions int
	}{
		{0, 0, 0, 0},
		{256, 96, 6, 47},
		{1024, 192, 34, 243},
		{1 << 20, 4096, 43520, 304640},
		{16, 66, 4, 0},
	} {
		b := Plan(c.soft)
		if b.Reserved != c.reserved || b.SealedSegments != c.sealed || b.Partitions != c.partitions {
			t.Errorf("Plan(%d) = %+v, want reserved %d sealed %d partitions %d", c.soft, b, c.reserved, c.sealed, c.partitions)
		}
		if c.soft > 0 && b.Reserved+DescriptorsPerPartition*(b.SealedSegments+b.Partitions) > int(c.soft) && b.Partitions > 0 {
			t.Errorf("Plan(%d) = %+v spends more than the limit", c.soft, b)
		}
	}
}

func TestRaiseReachesTheHardLimit(t *testing.T) {
	l, err := Raise()
	if err != nil {
		t.Fatal(err)
	}
	if l.Hard != 0 && l.Soft != l.Hard {
		t.Fatalf("soft limit %d after Raise, hard %d", l.Soft, l.Hard)
	}
}
