package metadata

import (
	"bytes"
	"errors"
	"testing"
)

func quotaFixture(t *testing.T) *State {
	t.Helper()
	st := snapshotFixture(t)
	name := func(s string) *string { return &s }
	recs, res := st.PlanAlterClientQuotas([]QuotaAlteration{
		{Entity: []QuotaEntityPart{{Type: QuotaEntityUser, Name: name("alice")}}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1 << 20}, {Key: QuotaRequestPercentage, Value: 12.5}}},
		{Entity: []QuotaEntityPart{{Type: QuotaEntityUser}, {Type: QuotaEntityClientID, Name: name("c")}}, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 4096}}},
		{Entity: []QuotaEntityPart{{Type: QuotaEntityIP, Name: name("::1")}}, Ops: []QuotaOp{{Key: QuotaConnectionCreationRate, Value: 5}}},
	}, false)
	for _, err := range res {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range recs {
		if err := st.Apply(st.Offset()+1, r); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestSnapshotClientQuotas: quotas survive a snapshot; a version 5 image
// (no quotas section) still decodes, without quotas; a bad quotas section
// is corrupt.
func TestSnapshotClientQuotas(t *testing.T) {
	st := quotaFixture(t)
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(t, back), b) || len(back.ClientQuotas()) != 3 {
		t.Fatalf("quotas after a round trip: %v, want %v", back.ClientQuotas(), st.ClientQuotas())
	}
	if v, ok := back.ClientQuota(QuotaEntity{User: NamedQuota("alice")}, QuotaRequestPercentage); !ok || v != 12.5 {
		t.Fatalf("alice's request_percentage after a round trip: %v %v", v, ok)
	}

	plain := snapshotFixture(t)
	v7 := marshal(t, plain)
	for v, drop := range map[byte]int{6: 1, 5: 2} { // v6 lacks the quotas count, v5 the scram one too
		old := append([]byte(nil), v7[:len(v7)-drop]...)
		old[len(snapshotMagic)] = v
		putCRC(old)
		img, err := Unmarshal(old)
		if err != nil {
			t.Fatalf("version %d image: %v", v, err)
		}
		if img.HasClientQuotas() || !bytes.Equal(marshal(t, img), v7) {
			t.Fatalf("version %d image does not restore as the same image without quotas", v)
		}
	}

	entries := st.ClientQuotas()
	saved := st.quotas
	st.quotas = map[QuotaEntity]map[string]float64{}
	base := marshal(t, st) // st's image with an empty quotas section
	st.quotas = saved
	type kv struct {
		k string
		v float64
	}
	section := func(es []ClientQuotaEntry, vals func(ClientQuotaEntry) []kv) []byte {
		e := encoder{b: append([]byte(nil), base[:len(base)-1]...)}
		e.count(len(es))
		for _, q := range es {
			encodeQuotaEntity(&e, q.Entity)
			kvs := vals(q)
			e.count(len(kvs))
			for _, x := range kvs {
				e.str(x.k)
				e.f64(x.v)
			}
		}
		putCRC(e.b)
		return e.b
	}
	sorted := func(q ClientQuotaEntry) []kv {
		var out []kv
		for _, k := range sortedKeys(q.Values) {
			out = append(out, kv{k, q.Values[k]})
		}
		return out
	}
	if got := section(entries, sorted); !bytes.Equal(got, b) {
		t.Fatal("hand-built section differs from Marshal's")
	}
	for name, img := range map[string][]byte{
		"entities out of order": section([]ClientQuotaEntry{entries[1], entries[0]}, sorted),
		"entity repeated":       section([]ClientQuotaEntry{entries[0], entries[0]}, sorted),
		"entity without values": section(entries[:1], func(ClientQuotaEntry) []kv { return nil }),
		"keys out of order": section(entries[2:], func(ClientQuotaEntry) []kv {
			return []kv{{QuotaRequestPercentage, 1}, {QuotaProducerByteRate, 1}}
		}),
		"invalid value": section(entries[2:], func(ClientQuotaEntry) []kv { return []kv{{QuotaProducerByteRate, 0.5}} }),
		"wrong key for ip": section(entries[:1], func(ClientQuotaEntry) []kv {
			return []kv{{QuotaProducerByteRate, 1}}
		}),
	} {
		if _, err := Unmarshal(img); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v, want ErrCorruptSnapshot", name, err)
		}
	}
}

// TestApplyClientQuotaRefusals: Apply refuses a quota record the image or
// the validation contradicts.
func TestApplyClientQuotaRefusals(t *testing.T) {
	st := quotaFixture(t)
	alice := QuotaEntity{User: NamedQuota("alice")}
	for name, r := range map[string]*ClientQuotaRecord{
		"remove of unset key": {Entity: alice, Key: QuotaConsumerByteRate, Remove: true},
		"unknown key":         {Entity: alice, Key: "bogus", Value: 1},
		"ip key on a user":    {Entity: alice, Key: QuotaConnectionCreationRate, Value: 1},
		"zero value":          {Entity: alice, Key: QuotaProducerByteRate},
		"empty entity":        {Key: QuotaProducerByteRate, Value: 1},
		"ip with user":        {Entity: QuotaEntity{User: NamedQuota("a"), IP: DefaultQuota()}, Key: QuotaConnectionCreationRate, Value: 1},
		"not canonical":       {Entity: QuotaEntity{User: QuotaName{Set: true, Default: true, Name: "x"}}, Key: QuotaProducerByteRate, Value: 1},
	} {
		if err := st.Apply(st.Offset()+1, r); !errors.Is(err, ErrInconsistentRecord) {
			t.Errorf("%s: %v, want ErrInconsistentRecord", name, err)
		}
	}
}
