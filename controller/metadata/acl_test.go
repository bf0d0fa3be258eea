package metadata

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strata-io/strata/broker/authz"
)

func aclFixture(t *testing.T) *State {
	t.Helper()
	st := snapshotFixture(t)
	var acls []authz.ACL
	for _, s := range []string{
		"TOPIC:LITERAL:orders ALLOW User:alice@* READ",
		"TOPIC:PREFIXED:pay DENY User:bob@10.0.0.1 WRITE",
		"CLUSTER:LITERAL:kafka-cluster ALLOW User:*@* IDEMPOTENT_WRITE",
	} {
		a, err := authz.ParseACL(s)
		if err != nil {
			t.Fatal(err)
		}
		acls = append(acls, a)
	}
	recs, _ := st.PlanCreateACLs(acls, rand.New(rand.NewPCG(1, 2)))
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if err := st.Apply(st.Offset()+1, r); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestSnapshotACLs: ACLs survive a snapshot; a version 4 image (no acls
// section) still decodes, without ACLs; a bad acls section is corrupt.
func TestSnapshotACLs(t *testing.T) {
	st := aclFixture(t)
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.ACLs(), st.ACLs(); len(got) != 3 || len(want) != 3 || got[0] != want[0] || got[2] != want[2] {
		t.Fatalf("ACLs after a round trip: %v, want %v", got, want)
	}

	// Version 4: the same image without the acls section.
	plain := snapshotFixture(t)
	v7 := marshal(t, plain)
	v4 := append([]byte(nil), v7[:len(v7)-3]...) // drop the empty acls, scram and quotas counts
	v4[len(snapshotMagic)] = 4
	putCRC(v4)
	old, err := Unmarshal(v4)
	if err != nil {
		t.Fatalf("version 4 image: %v", err)
	}
	if len(old.ACLs()) != 0 || !bytes.Equal(marshal(t, old), v7) {
		t.Fatal("version 4 image does not restore as the same image without ACLs")
	}

	// Out of order and invalid entries are corruption.
	entries := st.ACLs()
	section := func(es []ACLEntry) []byte {
		e := encoder{b: append([]byte(nil), v7[:len(v7)-3]...)}
		e.count(len(es))
		for _, a := range es {
			e.uuid(a.ID)
			e.u8(uint8(a.ResourceType))
			e.str(a.ResourceName)
			e.u8(uint8(a.PatternType))
			e.str(a.Principal)
			e.str(a.Host)
			e.u8(uint8(a.Operation))
			e.u8(uint8(a.Permission))
		}
		e.count(0) // scram
		e.count(0) // quotas
		putCRC(e.b)
		return e.b
	}
	if _, err := Unmarshal(section(entries)); err != nil {
		t.Fatalf("hand-built section refused: %v", err)
	}
	bad := entries[0]
	bad.Operation = authz.OpAny
	for name, es := range map[string][]ACLEntry{
		"out of order": {entries[1], entries[0]},
		"repeated":     {entries[0], entries[0]},
		"invalid":      {bad},
	} {
		if _, err := Unmarshal(section(es)); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v, want ErrCorruptSnapshot", name, err)
		}
	}
}

// TestApplyACLRefusals: Apply refuses an ACL record the image contradicts.
func TestApplyACLRefusals(t *testing.T) {
	st := aclFixture(t)
	e := st.ACLs()[0]
	for name, r := range map[string]Record{
		"dup id":          &AccessControlEntryRecord{ID: e.ID, ACL: e.ACL},
		"invalid binding": &AccessControlEntryRecord{ID: fixtureGone, ACL: authz.ACL{ResourceType: authz.ResTopic}},
		"unknown remove":  &RemoveAccessControlEntryRecord{ID: fixtureGone},
	} {
		if err := st.Apply(st.Offset()+1, r); !errors.Is(err, ErrInconsistentRecord) {
			t.Errorf("%s: %v, want ErrInconsistentRecord", name, err)
		}
	}
}
