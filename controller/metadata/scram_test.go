package metadata

import (
	"bytes"
	"context"
	"errors"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/broker/sasl"
)

func scramFixture(t testing.TB) *State {
	t.Helper()
	st := snapshotFixture(t)
	var ups []ScramUpsertion
	for _, u := range []struct {
		name, pass string
		mech       ScramMechanism
		iters      int32
	}{{"alice", "alice-secret", ScramSHA256, 8192}, {"alice", "alice-secret", ScramSHA512, 4096}, {"bob", "bob-secret", ScramSHA512, 15000}} {
		salted, err := sasl.ScramSaltedPassword(u.mech.String(), u.pass, []byte("salt-"+u.name), int(u.iters))
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, ScramUpsertion{Name: u.name, Mechanism: u.mech, Iterations: u.iters, Salt: []byte("salt-" + u.name), SaltedPassword: salted})
	}
	// alice twice would be DUPLICATE_RESOURCE in one request: two requests.
	for _, batch := range [][]ScramUpsertion{{ups[0], ups[2]}, {ups[1]}} {
		recs, res := st.PlanAlterUserScramCredentials(nil, batch)
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestScramCredentialFromImageAuthenticates: a credential planned from the
// salted password a client sends (KIP-554) authenticates franz-go's SCRAM
// client through broker/sasl, for both mechanisms; the wrong password fails.
func TestScramCredentialFromImageAuthenticates(t *testing.T) {
	st := scramFixture(t)
	creds := sasl.ScramCredentialsFunc(func(user, mech string) (sasl.ScramCredential, bool) {
		return st.ScramCredential(user, ScramMechanismByName(mech))
	})
	for _, c := range []struct {
		mech       string
		user, pass string
		ok         bool
	}{
		{sasl.ScramSHA256, "alice", "alice-secret", true},
		{sasl.ScramSHA512, "alice", "alice-secret", true},
		{sasl.ScramSHA512, "bob", "bob-secret", true},
		{sasl.ScramSHA256, "bob", "bob-secret", false}, // no SHA-256 credential
		{sasl.ScramSHA512, "bob", "alice-secret", false},
	} {
		m, err := sasl.NewScram(c.mech, creds)
		if err != nil {
			t.Fatal(err)
		}
		auth := kscram.Auth{User: c.user, Pass: c.pass}
		cm := auth.AsSha256Mechanism()
		if c.mech == sasl.ScramSHA512 {
			cm = auth.AsSha512Mechanism()
		}
		cs, msg, err := cm.Authenticate(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		ss := m.Start()
		var done bool
		for i := 0; i < 2 && err == nil; i++ {
			var out []byte
			out, done, err = ss.Step(msg)
			if err == nil {
				_, msg, err = cs.Challenge(out)
			}
		}
		if ok := err == nil && done && ss.Principal() == c.user; ok != c.ok {
			t.Errorf("%s %s/%s: ok %v (err %v), want %v", c.mech, c.user, c.pass, ok, err, c.ok)
		}
	}
}

// TestSnapshotScram: credentials survive a snapshot; a version 5 image (no
// scram section) still decodes, without credentials; a bad scram section
// is corrupt.
func TestSnapshotScram(t *testing.T) {
	st := scramFixture(t)
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got, want := back.ScramCredentials(), st.ScramCredentials()
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("%d credentials after a round trip, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Name != want[i].Name || got[i].Mechanism != want[i].Mechanism || got[i].Iterations != want[i].Iterations ||
			!bytes.Equal(got[i].Salt, want[i].Salt) || !bytes.Equal(got[i].StoredKey, want[i].StoredKey) || !bytes.Equal(got[i].ServerKey, want[i].ServerKey) {
			t.Fatalf("credential %d after a round trip: %+v, want %+v", i, got[i], want[i])
		}
	}
	if !bytes.Equal(marshal(t, back), b) || !bytes.Equal(marshal(t, st.Clone()), b) {
		t.Fatal("re-marshal of the restored image or of a clone differs")
	}

	// Version 5: the same image without the scram section.
	plain := snapshotFixture(t)
	v7 := marshal(t, plain)
	v5 := append([]byte(nil), v7[:len(v7)-2]...) // drop the empty scram and quotas counts
	v5[len(snapshotMagic)] = 5
	putCRC(v5)
	old, err := Unmarshal(v5)
	if err != nil {
		t.Fatalf("version 5 image: %v", err)
	}
	if len(old.ScramCredentials()) != 0 || !bytes.Equal(marshal(t, old), v7) {
		t.Fatal("version 5 image does not restore as the same image without credentials")
	}

	entries := st.ScramCredentials()
	section := func(es []ScramCredentialEntry) []byte {
		e := encoder{b: append([]byte(nil), v7[:len(v7)-2]...)}
		e.count(len(es))
		for _, c := range es {
			encodeScram(&e, &UserScramCredentialRecord{Name: c.Name, Mechanism: c.Mechanism, Salt: c.Salt,
				StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int32(c.Iterations)})
		}
		e.count(0) // quotas
		putCRC(e.b)
		return e.b
	}
	if _, err := Unmarshal(section(entries)); err != nil {
		t.Fatalf("hand-built section refused: %v", err)
	}
	short := entries[0]
	short.StoredKey = short.StoredKey[:16]
	few := entries[1]
	few.Iterations = 100
	for name, es := range map[string][]ScramCredentialEntry{
		"out of order": {entries[1], entries[0]},
		"repeated":     {entries[0], entries[0]},
		"short key":    {short},
		"iterations":   {few},
	} {
		if _, err := Unmarshal(section(es)); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v, want ErrCorruptSnapshot", name, err)
		}
	}
}

// TestApplyScramRefusals: Apply refuses a credential record no planner
// writes and the removal of an absent credential, and Decode refuses them
// as corrupt; the image is unchanged.
func TestApplyScramRefusals(t *testing.T) {
	st := scramFixture(t)
	before := marshal(t, st)
	good := &UserScramCredentialRecord{Name: "x", Mechanism: ScramSHA256, Salt: []byte("s"),
		StoredKey: make([]byte, 32), ServerKey: make([]byte, 32), Iterations: 4096}
	mut := func(f func(r *UserScramCredentialRecord)) *UserScramCredentialRecord {
		c := *good
		f(&c)
		return &c
	}
	for name, r := range map[string]Record{
		"no name":        mut(func(r *UserScramCredentialRecord) { r.Name = "" }),
		"mechanism":      mut(func(r *UserScramCredentialRecord) { r.Mechanism = 3 }),
		"no salt":        mut(func(r *UserScramCredentialRecord) { r.Salt = nil }),
		"key size":       mut(func(r *UserScramCredentialRecord) { r.Mechanism = ScramSHA512 }),
		"iterations":     mut(func(r *UserScramCredentialRecord) { r.Iterations = 16385 }),
		"absent removal": &RemoveUserScramCredentialRecord{Name: "bob", Mechanism: ScramSHA256},
	} {
		if err := st.Apply(st.Offset()+1, r); !errors.Is(err, ErrInconsistentRecord) {
			t.Errorf("%s: %v, want ErrInconsistentRecord", name, err)
		}
		if name != "absent removal" {
			if _, err := Decode(Encode(r)); !errors.Is(err, ErrCorruptRecord) {
				t.Errorf("%s: decode %v, want ErrCorruptRecord", name, err)
			}
		}
	}
	if _, err := Decode(Encode(&RemoveUserScramCredentialRecord{Name: "bob", Mechanism: 0})); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("removal with mechanism 0: %v", err)
	}
	if !bytes.Equal(marshal(t, st), before) {
		t.Fatal("refused records changed the image")
	}
	if err := st.Apply(st.Offset()+1, good); err != nil {
		t.Fatal(err)
	}
}

// TestScramRecordFromPassword: the bootstrap record of a password is the
// record the planner derives from the same salted password.
func TestScramRecordFromPassword(t *testing.T) {
	r, err := ScramRecordFromPassword("alice", ScramSHA512, "pw", []byte("salt"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	salted, _ := sasl.ScramSaltedPassword(sasl.ScramSHA512, "pw", []byte("salt"), 4096)
	recs, res := NewState().PlanAlterUserScramCredentials(nil, []ScramUpsertion{{Name: "alice", Mechanism: ScramSHA512, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: salted}})
	if len(recs) != 1 || res[0].Err != nil {
		t.Fatalf("%v %v", recs, res)
	}
	p := recs[0].(*UserScramCredentialRecord)
	if !bytes.Equal(p.StoredKey, r.StoredKey) || !bytes.Equal(p.ServerKey, r.ServerKey) {
		t.Fatal("bootstrap record differs from the planned one")
	}
	if _, err := ScramRecordFromPassword("alice", ScramSHA256, "pw", []byte("salt"), 100); err == nil {
		t.Fatal("100 iterations accepted")
	}
	if _, err := ScramRecordFromPassword("alice", ScramUnknown, "pw", []byte("salt"), 4096); err == nil {
		t.Fatal("unknown mechanism accepted")
	}
}
