package metadata

// SCRAM credentials in the image: Kafka KRaft's UserScramCredentialRecord and
// RemoveUserScramCredentialRecord, their apply, the image accessors and the
// AlterUserScramCredentials planner (Kafka's ScramControlManager). A record
// carries what RFC 5802 derives from a password (salt, StoredKey, ServerKey,
// iterations), never the password nor the salted password: the planner
// derives the keys from the salted password the request carries
// (KIP-554), as Kafka's controller does. The derivation and the mechanism
// names are broker/sasl's (a leaf package of the standard library only).

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/sasl"
)

// ScramMechanism is a SCRAM mechanism as Kafka numbers it
// (org.apache.kafka.clients.admin.ScramMechanism, the mechanism field of
// KIP-554's requests and of the records).
type ScramMechanism int8

// SCRAM mechanisms.
const (
	ScramUnknown ScramMechanism = 0
	ScramSHA256  ScramMechanism = 1
	ScramSHA512  ScramMechanism = 2
)

// String returns the mechanism's SASL name, e.g. "SCRAM-SHA-256".
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return sasl.ScramSHA256
	case ScramSHA512:
		return sasl.ScramSHA512
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(m))
}

// ScramMechanismByName returns the mechanism with that SASL name, or
// ScramUnknown.
func ScramMechanismByName(name string) ScramMechanism {
	switch name {
	case sasl.ScramSHA256:
		return ScramSHA256
	case sasl.ScramSHA512:
		return ScramSHA512
	}
	return ScramUnknown
}

// keySize is the length of the mechanism's StoredKey and ServerKey (its
// hash's output), or 0 for an unknown mechanism.
func (m ScramMechanism) keySize() int {
	switch m {
	case ScramSHA256:
		return 32
	case ScramSHA512:
		return 64
	}
	return 0
}

// UserScramCredentialRecord sets a user's credential for one mechanism,
// replacing any earlier one (Kafka's UserScramCredentialRecord).
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  ScramMechanism
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// RemoveUserScramCredentialRecord removes a user's credential for one
// mechanism; Apply refuses an absent one.
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism ScramMechanism
}

// Versions written by Encode (records.go has the others').
const (
	versionUserScramCredential       = 0
	versionRemoveUserScramCredential = 0
)

// Type implements [Record].
func (*UserScramCredentialRecord) Type() RecordType { return TypeUserScramCredential }

// Version implements [Record].
func (*UserScramCredentialRecord) Version() uint8 { return versionUserScramCredential }

// Type implements [Record].
func (*RemoveUserScramCredentialRecord) Type() RecordType { return TypeRemoveUserScramCredential }

// Version implements [Record].
func (*RemoveUserScramCredentialRecord) Version() uint8 { return versionRemoveUserScramCredential }

type scramKey struct {
	name string
	mech ScramMechanism
}

// ScramCredentialEntry is one credential of the image.
type ScramCredentialEntry struct {
	Name      string
	Mechanism ScramMechanism
	sasl.ScramCredential
}

// validateScramRecord is what Apply and Decode require of a credential
// record: a name, a known mechanism, a salt, keys of the mechanism's size
// and iterations within Kafka's bounds.
func validateScramRecord(r *UserScramCredentialRecord) error {
	n := r.Mechanism.keySize()
	switch {
	case r.Name == "":
		return fmt.Errorf("scram credential without a user name")
	case n == 0:
		return fmt.Errorf("scram mechanism %d", r.Mechanism)
	case len(r.Salt) == 0:
		return fmt.Errorf("scram credential of %q without a salt", r.Name)
	case len(r.StoredKey) != n || len(r.ServerKey) != n:
		return fmt.Errorf("scram credential of %q: keys of %d and %d bytes for %s", r.Name, len(r.StoredKey), len(r.ServerKey), r.Mechanism)
	case r.Iterations < sasl.ScramMinIterations || r.Iterations > sasl.ScramMaxIterations:
		return fmt.Errorf("scram credential of %q: %d iterations", r.Name, r.Iterations)
	}
	return nil
}

func (s *State) applyScram(r *UserScramCredentialRecord) error {
	if err := validateScramRecord(r); err != nil {
		return inconsistent("%v", err)
	}
	s.scram[scramKey{r.Name, r.Mechanism}] = sasl.ScramCredential{
		Salt:       slices.Clone(r.Salt),
		StoredKey:  slices.Clone(r.StoredKey),
		ServerKey:  slices.Clone(r.ServerKey),
		Iterations: int(r.Iterations),
	}
	return nil
}

func (s *State) applyRemoveScram(r *RemoveUserScramCredentialRecord) error {
	k := scramKey{r.Name, r.Mechanism}
	if _, ok := s.scram[k]; !ok {
		return inconsistent("remove of absent scram credential %q %s", r.Name, r.Mechanism)
	}
	delete(s.scram, k)
	return nil
}

// ScramCredential returns a user's credential for a mechanism. The slices
// are shared with the image and must not be changed.
func (s *State) ScramCredential(name string, mech ScramMechanism) (sasl.ScramCredential, bool) {
	c, ok := s.scram[scramKey{name, mech}]
	return c, ok
}

// ScramCredentials returns every credential of the image by user, then
// mechanism. The slices are shared with the image and must not be changed.
func (s *State) ScramCredentials() []ScramCredentialEntry {
	out := make([]ScramCredentialEntry, 0, len(s.scram))
	for k, c := range s.scram {
		out = append(out, ScramCredentialEntry{Name: k.name, Mechanism: k.mech, ScramCredential: c})
	}
	slices.SortFunc(out, func(a, b ScramCredentialEntry) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	return out
}

// ScramDeletion is one deletion of an AlterUserScramCredentials.
type ScramDeletion struct {
	Name      string
	Mechanism ScramMechanism
}

// ScramUpsertion is one upsertion of an AlterUserScramCredentials: the
// client salted the password itself (KIP-554).
type ScramUpsertion struct {
	Name           string
	Mechanism      ScramMechanism
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// AlterScramResult is the outcome for one user of an
// AlterUserScramCredentials.
type AlterScramResult struct {
	User string
	Err  error // nil: done
}

// PlanAlterUserScramCredentials decides an AlterUserScramCredentials as
// Kafka's ScramControlManager.alterCredentials:
//   - a user named twice in the request (in deletions, upsertions or
//     both, whatever the mechanisms) gets DUPLICATE_RESOURCE and none of
//     its alterations is done;
//   - an empty user name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
//     UNSUPPORTED_SASL_MECHANISM;
//   - deleting a credential the image lacks is RESOURCE_NOT_FOUND;
//   - an upsertion with iterations outside [4096, 16384] is
//     UNACCEPTABLE_CREDENTIAL ("Too few iterations" / "Too many
//     iterations"), as is one with an empty salt or salted password
//     (Kafka's broker refused an empty salt, its HMAC an empty key; a
//     salted password of any other length is taken, as Kafka takes it).
//
// There is one result per user, in the order users first appear
// (deletions, then upsertions); Kafka answers in hash-map order. Every
// record goes in one batch.
func (s *State) PlanAlterUserScramCredentials(dels []ScramDeletion, ups []ScramUpsertion) ([]Record, []AlterScramResult) {
	var order []string
	errs := map[string]error{}
	dup := fmt.Errorf("%w: A user credential cannot be altered twice in the same request", kerr.DuplicateResource)
	seen := map[string]bool{}
	note := func(name string) bool {
		if _, failed := errs[name]; failed {
			return false
		}
		if seen[name] {
			errs[name] = dup
			return false
		}
		seen[name] = true
		order = append(order, name)
		return true
	}
	var okDels []ScramDeletion
	for _, d := range dels {
		if note(d.Name) {
			okDels = append(okDels, d)
		}
	}
	var okUps []ScramUpsertion
	for _, u := range ups {
		if note(u.Name) {
			okUps = append(okUps, u)
		}
	}
	var recs []Record
	for _, d := range okDels {
		if errs[d.Name] != nil {
			continue
		}
		if err := validateScramName(d.Name, d.Mechanism); err != nil {
			errs[d.Name] = err
			continue
		}
		if _, ok := s.scram[scramKey{d.Name, d.Mechanism}]; !ok {
			errs[d.Name] = fmt.Errorf("%w: Attempt to delete a user credential that does not exist", kerr.ResourceNotFound)
			continue
		}
		recs = append(recs, &RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range okUps {
		if errs[u.Name] != nil {
			continue
		}
		r, err := planScramUpsertion(u)
		if err != nil {
			errs[u.Name] = err
			continue
		}
		recs = append(recs, r)
	}
	// Order is first appearance; a duplicate's first appearance stays.
	res := make([]AlterScramResult, 0, len(order))
	for _, name := range order {
		res = append(res, AlterScramResult{User: name, Err: errs[name]})
	}
	return recs, res
}

func validateScramName(name string, mech ScramMechanism) error {
	if name == "" {
		return fmt.Errorf("%w: Username must not be empty", kerr.UnacceptableCredential)
	}
	if mech.keySize() == 0 {
		return fmt.Errorf("%w: Unknown SCRAM mechanism", kerr.UnsupportedSaslMechanism)
	}
	return nil
}

func planScramUpsertion(u ScramUpsertion) (*UserScramCredentialRecord, error) {
	if err := validateScramName(u.Name, u.Mechanism); err != nil {
		return nil, err
	}
	switch {
	case u.Iterations < sasl.ScramMinIterations:
		return nil, fmt.Errorf("%w: Too few iterations", kerr.UnacceptableCredential)
	case u.Iterations > sasl.ScramMaxIterations:
		return nil, fmt.Errorf("%w: Too many iterations", kerr.UnacceptableCredential)
	case len(u.Salt) == 0:
		return nil, fmt.Errorf("%w: Salt must not be empty", kerr.UnacceptableCredential)
	case len(u.SaltedPassword) == 0:
		// Kafka's HMAC key spec refuses an empty key; any other length
		// is an HMAC key (kafka-go's test sends 18 bytes for SHA-512).
		return nil, fmt.Errorf("%w: Salted password must not be empty", kerr.UnacceptableCredential)
	}
	c, err := sasl.ScramCredentialFromSalted(u.Mechanism.String(), u.SaltedPassword, u.Salt, int(u.Iterations))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", kerr.UnacceptableCredential, err)
	}
	return &UserScramCredentialRecord{Name: u.Name, Mechanism: u.Mechanism, Salt: c.Salt,
		StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: u.Iterations}, nil
}

// ScramRecordFromPassword builds the credential record of a password (the
// bootstrap of `strata format --add-scram`), validated as Apply would.
func ScramRecordFromPassword(name string, mech ScramMechanism, password string, salt []byte, iterations int32) (*UserScramCredentialRecord, error) {
	if mech.keySize() == 0 {
		return nil, fmt.Errorf("unknown SCRAM mechanism %s", mech)
	}
	salted, err := sasl.ScramSaltedPassword(mech.String(), password, salt, int(iterations))
	if err != nil {
		return nil, err
	}
	r, err := planScramUpsertion(ScramUpsertion{Name: name, Mechanism: mech, Iterations: iterations, Salt: salt, SaltedPassword: salted})
	if err != nil {
		return nil, err
	}
	return r, validateScramRecord(r)
}

// ScramUserDescription is one user of a DescribeUserScramCredentials
// answer: its mechanisms and iterations, or an error.
type ScramUserDescription struct {
	User  string
	Creds []ScramCredentialEntry // by mechanism
	Err   error
}

// DescribeUserScramCredentials answers a DescribeUserScramCredentials as
// Kafka's ScramImage.describe: no users (nil or empty) describes every user
// with a credential; a user named twice gets DUPLICATE_RESOURCE, one
// without credentials RESOURCE_NOT_FOUND. Users are sorted by name (Kafka
// answers in hash-map order).
func (s *State) DescribeUserScramCredentials(users []string) []ScramUserDescription {
	byUser := map[string][]ScramCredentialEntry{}
	for _, c := range s.ScramCredentials() {
		byUser[c.Name] = append(byUser[c.Name], c)
	}
	dup := map[string]bool{}
	if len(users) == 0 {
		for u := range byUser {
			dup[u] = false
		}
	} else {
		for _, u := range users {
			_, seen := dup[u]
			dup[u] = seen
		}
	}
	out := make([]ScramUserDescription, 0, len(dup))
	for u, twice := range dup {
		d := ScramUserDescription{User: u}
		switch {
		case twice:
			d.Err = fmt.Errorf("%w: Cannot describe SCRAM credentials for the same user twice in a single request: %s", kerr.DuplicateResource, u)
		case len(byUser[u]) == 0:
			d.Err = fmt.Errorf("%w: Attempt to describe a user credential that does not exist: %s", kerr.ResourceNotFound, u)
		default:
			d.Creds = byUser[u]
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b ScramUserDescription) int { return cmp.Compare(a.User, b.User) })
	return out
}
