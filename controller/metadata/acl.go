package metadata

// ACLs in the image: Kafka KRaft's AccessControlEntryRecord and
// RemoveAccessControlEntryRecord, their apply, the image accessors and the
// CreateAcls / DeleteAcls planners. The ACL model and its validation are
// broker/authz's (a leaf package with no imports of ours), so the
// controller refuses exactly what the authorizer could not evaluate.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/authz"
)

// AccessControlEntryRecord adds one ACL binding under its ID (Kafka's
// AccessControlEntryRecord). Apply refuses an ID already present and a
// binding authz.ValidateACL refuses.
type AccessControlEntryRecord struct {
	ID uuid.UUID
	authz.ACL
}

// RemoveAccessControlEntryRecord removes the ACL with that ID; Apply
// refuses an unknown ID.
type RemoveAccessControlEntryRecord struct {
	ID uuid.UUID
}

// Type implements [Record].
func (*AccessControlEntryRecord) Type() RecordType { return TypeAccessControlEntry }

// Version implements [Record].
func (*AccessControlEntryRecord) Version() uint8 { return versionAccessControlEntry }

// Type implements [Record].
func (*RemoveAccessControlEntryRecord) Type() RecordType { return TypeRemoveAccessControlEntry }

// Version implements [Record].
func (*RemoveAccessControlEntryRecord) Version() uint8 { return versionRemoveAccessControlEntry }

// ACLEntry is one ACL of the image with its ID.
type ACLEntry struct {
	ID uuid.UUID
	authz.ACL
}

func (s *State) applyACL(r *AccessControlEntryRecord) error {
	if r.ID == uuid.Nil {
		return inconsistent("acl with the nil id")
	}
	if _, dup := s.acls[r.ID]; dup {
		return inconsistent("acl %s exists", r.ID)
	}
	if err := authz.ValidateACL(r.ACL); err != nil {
		return inconsistent("acl %s: %v", r.ID, err)
	}
	s.acls[r.ID] = r.ACL
	return nil
}

func (s *State) applyRemoveACL(r *RemoveAccessControlEntryRecord) error {
	if _, ok := s.acls[r.ID]; !ok {
		return inconsistent("remove of unknown acl %s", r.ID)
	}
	delete(s.acls, r.ID)
	return nil
}

// ACLs returns every ACL of the image, by ID.
func (s *State) ACLs() []ACLEntry {
	out := make([]ACLEntry, 0, len(s.acls))
	for id, a := range s.acls {
		out = append(out, ACLEntry{ID: id, ACL: a})
	}
	slices.SortFunc(out, func(a, b ACLEntry) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// DescribeACLs returns the ACLs the filter matches, by ID. The caller
// validates the filter (authz.ValidateFilter).
func (s *State) DescribeACLs(f authz.Filter) []ACLEntry {
	var out []ACLEntry
	for _, e := range s.ACLs() {
		if f.Matches(e.ACL) {
			out = append(out, e)
		}
	}
	return out
}

// CreateACLResult is the outcome of one binding of a CreateAcls.
type CreateACLResult struct {
	Err error // nil: created, or already present
}

// PlanCreateACLs decides a CreateAcls, as Kafka's AclControlManager: each
// binding is validated (INVALID_REQUEST: unknown or ANY/MATCH resource or
// pattern type, ANY/unknown operation or permission, empty name, a CLUSTER
// resource not named kafka-cluster, a principal not Type:name, no host);
// a valid binding already in the image or earlier in the request succeeds
// without a record; every other one gets an AccessControlEntryRecord with a
// fresh ID from rng.
func (s *State) PlanCreateACLs(acls []authz.ACL, rng *rand.Rand) ([]Record, []CreateACLResult) {
	have := map[authz.ACL]bool{}
	for _, a := range s.acls {
		have[a] = true
	}
	taken := map[uuid.UUID]bool{}
	var recs []Record
	res := make([]CreateACLResult, len(acls))
	for i, a := range acls {
		if err := authz.ValidateACL(a); err != nil {
			res[i].Err = fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
			continue
		}
		if have[a] {
			continue
		}
		have[a] = true
		id := s.newACLID(rng, taken)
		taken[id] = true
		recs = append(recs, &AccessControlEntryRecord{ID: id, ACL: a})
	}
	return recs, res
}

func (s *State) newACLID(rng *rand.Rand, taken map[uuid.UUID]bool) uuid.UUID {
	for {
		var id uuid.UUID
		for i := 0; i < 16; i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8; j++ {
				id[i+j] = byte(v >> (8 * j))
			}
		}
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if _, live := s.acls[id]; !live && !taken[id] && id != uuid.Nil {
			return id
		}
	}
}

// DeleteACLsResult is the outcome of one filter of a DeleteAcls.
type DeleteACLsResult struct {
	Err     error      // INVALID_REQUEST for a filter with an unknown part
	Deleted []ACLEntry // the ACLs the filter matched, by ID
}

// PlanDeleteACLs decides a DeleteAcls, as Kafka's AclControlManager: each
// valid filter matches against the image (ANY, MATCH and null fields as
// authz.Filter.Matches); its result lists every match, even one an earlier
// filter of the request also matched, and each matched ACL gets one
// RemoveAccessControlEntryRecord.
func (s *State) PlanDeleteACLs(filters []authz.Filter) ([]Record, []DeleteACLsResult) {
	removed := map[uuid.UUID]bool{}
	var recs []Record
	res := make([]DeleteACLsResult, len(filters))
	for i, f := range filters {
		if err := authz.ValidateFilter(f); err != nil {
			res[i].Err = fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
			continue
		}
		res[i].Deleted = s.DescribeACLs(f)
		for _, e := range res[i].Deleted {
			if !removed[e.ID] {
				removed[e.ID] = true
				recs = append(recs, &RemoveAccessControlEntryRecord{ID: e.ID})
			}
		}
	}
	return recs, res
}
