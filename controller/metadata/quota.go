package metadata

// Client quotas in the image: Kafka KRaft's ClientQuotaRecord, its apply,
// the image accessors, DescribeClientQuotas' filter and the
// AlterClientQuotas planner, with Kafka's validation
// (ClientQuotaControlManager, ClientQuotasImage.describe).
//
// An entity is a set of (type, name) with types user, client-id and ip and
// a null name for the type's default; ip stands alone. Each entity holds
// quota values by key: producer_byte_rate, consumer_byte_rate,
// request_percentage and controller_mutation_rate for user and client-id
// entities, connection_creation_rate for ip entities.
//
// Differences from Kafka: an ip entity's name must be an IP address
// (Kafka's InetAddress.getByName would also resolve a host name); a value
// that is not finite is INVALID_REQUEST (the controller RPC is JSON).

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Entity types, as Kafka's ClientQuotaEntity names them.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// Quota keys, as Kafka's QuotaConfig names them.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// quotaKeyKind is a quota key's Kafka config type: integral keys refuse
// fractions and values beyond their range.
type quotaKeyKind int

const (
	quotaDouble quotaKeyKind = iota
	quotaInt
	quotaLong
)

var (
	userClientQuotaKeys = map[string]quotaKeyKind{
		QuotaProducerByteRate: quotaLong, QuotaConsumerByteRate: quotaLong,
		QuotaRequestPercentage: quotaDouble, QuotaControllerMutationRate: quotaDouble,
	}
	ipQuotaKeys = map[string]quotaKeyKind{QuotaConnectionCreationRate: quotaInt}
)

// QuotaName is one component of a quota entity: absent (Set false), the
// type's default (Kafka's null name) or a name.
type QuotaName struct {
	Set     bool   `json:"set,omitempty"`
	Default bool   `json:"default,omitempty"`
	Name    string `json:"name,omitempty"`
}

// NamedQuota is the component of that name.
func NamedQuota(name string) QuotaName { return QuotaName{Set: true, Name: name} }

// DefaultQuota is the default component.
func DefaultQuota() QuotaName { return QuotaName{Set: true, Default: true} }

func (n QuotaName) String() string {
	switch {
	case !n.Set:
		return "-"
	case n.Default:
		return "<default>"
	}
	return n.Name
}

func compareQuotaName(a, b QuotaName) int {
	if c := cmp.Compare(boolInt(a.Set), boolInt(b.Set)); c != 0 {
		return c
	}
	if c := cmp.Compare(boolInt(a.Default), boolInt(b.Default)); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// QuotaEntity is a validated quota entity (Kafka's ClientQuotaEntity):
// user, client-id, both, or ip alone.
type QuotaEntity struct {
	User     QuotaName `json:"user"`
	ClientID QuotaName `json:"client_id"`
	IP       QuotaName `json:"ip"`
}

// QuotaEntityPart is one (type, name) of an entity as a request carries
// it; a nil name is the type's default.
type QuotaEntityPart struct {
	Type string
	Name *string
}

// Parts returns the entity's components in the order user, client-id, ip.
func (e QuotaEntity) Parts() []QuotaEntityPart {
	var out []QuotaEntityPart
	add := func(typ string, n QuotaName) {
		if !n.Set {
			return
		}
		p := QuotaEntityPart{Type: typ}
		if !n.Default {
			name := n.Name
			p.Name = &name
		}
		out = append(out, p)
	}
	add(QuotaEntityUser, e.User)
	add(QuotaEntityClientID, e.ClientID)
	add(QuotaEntityIP, e.IP)
	return out
}

func (e QuotaEntity) String() string {
	var parts []string
	for _, p := range e.Parts() {
		name := "<default>"
		if p.Name != nil {
			name = *p.Name
		}
		parts = append(parts, p.Type+"="+name)
	}
	return strings.Join(parts, ",")
}

func compareQuotaEntity(a, b QuotaEntity) int {
	if c := compareQuotaName(a.User, b.User); c != 0 {
		return c
	}
	if c := compareQuotaName(a.ClientID, b.ClientID); c != 0 {
		return c
	}
	return compareQuotaName(a.IP, b.IP)
}

func (e QuotaEntity) keys() map[string]quotaKeyKind {
	if e.IP.Set {
		return ipQuotaKeys
	}
	return userClientQuotaKeys
}

// ParseQuotaEntity validates a request's entity as Kafka's
// ClientQuotaControlManager.validateEntity: INVALID_REQUEST for an empty
// entity, a type given twice, an unknown type, an empty name, an ip that
// is not an address, or ip combined with user or client-id.
func ParseQuotaEntity(parts []QuotaEntityPart) (QuotaEntity, error) {
	var e QuotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("%w: Invalid empty client quota entity", kerr.InvalidRequest)
	}
	for _, p := range parts {
		var slot *QuotaName
		switch p.Type {
		case QuotaEntityUser:
			slot = &e.User
		case QuotaEntityClientID:
			slot = &e.ClientID
		case QuotaEntityIP:
			slot = &e.IP
		default:
			return QuotaEntity{}, fmt.Errorf("%w: Unhandled client quota entity type: %s", kerr.InvalidRequest, p.Type)
		}
		if slot.Set {
			return QuotaEntity{}, fmt.Errorf("%w: Invalid empty client quota entity, duplicate entity entry %s", kerr.InvalidRequest, p.Type)
		}
		if p.Name == nil {
			*slot = DefaultQuota()
			continue
		}
		if *p.Name == "" {
			return QuotaEntity{}, fmt.Errorf("%w: Empty %s not supported", kerr.InvalidRequest, p.Type)
		}
		if p.Type == QuotaEntityIP && net.ParseIP(*p.Name) == nil {
			return QuotaEntity{}, fmt.Errorf("%w: Invalid quota entity name %s", kerr.InvalidRequest, *p.Name)
		}
		*slot = NamedQuota(*p.Name)
	}
	if e.IP.Set && (e.User.Set || e.ClientID.Set) {
		return QuotaEntity{}, fmt.Errorf("%w: Invalid quota entity combination, IP entity should not be combined with User or ClientId", kerr.InvalidRequest)
	}
	return e, nil
}

// validQuotaValue checks one key's value for the entity, as Kafka's
// validateQuotaKeyValue.
func validQuotaValue(e QuotaEntity, key string, v float64) error {
	kind, ok := e.keys()[key]
	if !ok {
		return fmt.Errorf("%w: Invalid configuration key %s", kerr.InvalidRequest, key)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: Quota %s must be a finite number", kerr.InvalidRequest, key)
	}
	if v <= 0 {
		return fmt.Errorf("%w: Quota %s must be greater than 0", kerr.InvalidRequest, key)
	}
	switch kind {
	case quotaInt:
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: Proposed value for %s is too large for a INT.", kerr.InvalidRequest, key)
		}
	case quotaLong:
		if v > math.MaxInt64 {
			return fmt.Errorf("%w: Proposed value for %s is too large for a LONG.", kerr.InvalidRequest, key)
		}
	default:
		return nil
	}
	if math.Abs(math.Mod(v, 1)) > 1e-6 {
		return fmt.Errorf("%w: %s cannot be a fractional value.", kerr.InvalidRequest, key)
	}
	return nil
}

// ClientQuotaRecord sets (or, with Remove, removes) one quota key of an
// entity (Kafka's ClientQuotaRecord). Apply refuses a key the entity
// cannot hold, a value validation refuses, and the removal of a key the
// entity does not hold.
type ClientQuotaRecord struct {
	Entity QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

// Type implements [Record].
func (*ClientQuotaRecord) Type() RecordType { return TypeClientQuota }

// Version implements [Record].
func (*ClientQuotaRecord) Version() uint8 { return versionClientQuota }

func (s *State) applyClientQuota(r *ClientQuotaRecord) error {
	if err := checkQuotaRecord(r); err != nil {
		return inconsistent("%v", err)
	}
	vals := s.quotas[r.Entity]
	if r.Remove {
		if _, ok := vals[r.Key]; !ok {
			return inconsistent("remove of unset quota %s of %s", r.Key, r.Entity)
		}
		delete(vals, r.Key)
		if len(vals) == 0 {
			delete(s.quotas, r.Entity)
		}
		return nil
	}
	if vals == nil {
		vals = map[string]float64{}
		s.quotas[r.Entity] = vals
	}
	vals[r.Key] = r.Value
	return nil
}

// checkQuotaRecord validates a record's entity, key and value as the
// planner does (also the decoder's enum check).
func checkQuotaRecord(r *ClientQuotaRecord) error {
	e, err := ParseQuotaEntity(r.Entity.Parts())
	if err != nil {
		return err
	}
	if e != r.Entity {
		return fmt.Errorf("quota entity %+v not in canonical form", r.Entity)
	}
	if r.Remove {
		if _, ok := r.Entity.keys()[r.Key]; !ok {
			return fmt.Errorf("quota key %q for %s", r.Key, r.Entity)
		}
		return nil
	}
	return validQuotaValue(r.Entity, r.Key, r.Value)
}

// ClientQuotaEntry is one entity of the image with its values.
type ClientQuotaEntry struct {
	Entity QuotaEntity        `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// ClientQuotas returns every entity with quotas, in a fixed order
// (user, then client-id, then ip; absent before default before names).
func (s *State) ClientQuotas() []ClientQuotaEntry {
	out := make([]ClientQuotaEntry, 0, len(s.quotas))
	for e, vals := range s.quotas {
		c := make(map[string]float64, len(vals))
		for k, v := range vals {
			c[k] = v
		}
		out = append(out, ClientQuotaEntry{Entity: e, Values: c})
	}
	slices.SortFunc(out, func(a, b ClientQuotaEntry) int { return compareQuotaEntity(a.Entity, b.Entity) })
	return out
}

// ClientQuota returns the value of one key of one entity.
func (s *State) ClientQuota(e QuotaEntity, key string) (float64, bool) {
	v, ok := s.quotas[e][key]
	return v, ok
}

// HasClientQuotas reports whether any entity has a quota.
func (s *State) HasClientQuotas() bool { return len(s.quotas) > 0 }

// Match types of a DescribeClientQuotas filter component.
const (
	QuotaMatchExact   int8 = 0 // the named entity (Kafka's MATCH_TYPE_EXACT)
	QuotaMatchDefault int8 = 1 // the type's default (MATCH_TYPE_DEFAULT)
	QuotaMatchAny     int8 = 2 // any entity of the type, default included (MATCH_TYPE_SPECIFIED)
)

// QuotaFilterComponent is one component of a DescribeClientQuotas filter.
type QuotaFilterComponent struct {
	EntityType string
	MatchType  int8
	Match      *string
}

// DescribeClientQuotas returns the entities the filter matches, as Kafka's
// ClientQuotasImage.describe: an entity matches when it has every
// component's type, with the name (exact) or the default (default) asked
// for; strict also requires it to have no other type. Invalid filters
// (empty or repeated type, a match string with default/any or none with
// exact, ip with user or client-id) are INVALID_REQUEST; an unknown type or
// match type is UNSUPPORTED_VERSION.
func (s *State) DescribeClientQuotas(components []QuotaFilterComponent, strict bool) ([]ClientQuotaEntry, error) {
	type want struct {
		typ  string
		name QuotaName // Set false: any
	}
	var wants []want
	seen := map[string]bool{}
	for _, c := range components {
		if c.EntityType == "" {
			return nil, fmt.Errorf("%w: Invalid empty entity type.", kerr.InvalidRequest)
		}
		if seen[c.EntityType] {
			return nil, fmt.Errorf("%w: Entity type %s cannot appear more than once in the filter.", kerr.InvalidRequest, c.EntityType)
		}
		seen[c.EntityType] = true
		switch c.EntityType {
		case QuotaEntityUser, QuotaEntityClientID, QuotaEntityIP:
		default:
			return nil, fmt.Errorf("%w: Unsupported entity type %s", kerr.UnsupportedVersion, c.EntityType)
		}
		switch c.MatchType {
		case QuotaMatchExact:
			if c.Match == nil {
				return nil, fmt.Errorf("%w: Request specified MATCH_TYPE_EXACT, but set match string to null.", kerr.InvalidRequest)
			}
			wants = append(wants, want{c.EntityType, NamedQuota(*c.Match)})
		case QuotaMatchDefault:
			if c.Match != nil {
				return nil, fmt.Errorf("%w: Request specified MATCH_TYPE_DEFAULT, but also specified a match string.", kerr.InvalidRequest)
			}
			wants = append(wants, want{c.EntityType, DefaultQuota()})
		case QuotaMatchAny:
			if c.Match != nil {
				return nil, fmt.Errorf("%w: Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.", kerr.InvalidRequest)
			}
			wants = append(wants, want{c.EntityType, QuotaName{}})
		default:
			return nil, fmt.Errorf("%w: Unknown match type %d", kerr.UnsupportedVersion, c.MatchType)
		}
	}
	if seen[QuotaEntityIP] && (seen[QuotaEntityUser] || seen[QuotaEntityClientID]) {
		return nil, fmt.Errorf("%w: Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.", kerr.InvalidRequest)
	}
	get := func(e QuotaEntity, typ string) QuotaName {
		switch typ {
		case QuotaEntityUser:
			return e.User
		case QuotaEntityClientID:
			return e.ClientID
		}
		return e.IP
	}
	var out []ClientQuotaEntry
	for _, entry := range s.ClientQuotas() {
		if strict && len(entry.Entity.Parts()) != len(wants) {
			continue
		}
		ok := true
		for _, w := range wants {
			have := get(entry.Entity, w.typ)
			if !have.Set || (w.name.Set && have != w.name) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, entry)
		}
	}
	return out, nil
}

// QuotaOp is one operation of an AlterClientQuotas entry: set Key to Value,
// or remove it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is one entry of an AlterClientQuotas request.
type QuotaAlteration struct {
	Entity []QuotaEntityPart
	Ops    []QuotaOp
}

// PlanAlterClientQuotas decides an AlterClientQuotas, as Kafka's
// ClientQuotaControlManager: each entry's entity is validated
// (ParseQuotaEntity), a key given twice in one entry is INVALID_REQUEST
// ("Duplicate quota key"), each set is validated (unknown key for the
// entity, a value not above 0, a fraction or out of range for an integral
// key: INVALID_REQUEST) and any failure leaves the whole entry unchanged;
// setting a key to its current value and removing an unset key write
// nothing. Entries see the effect of earlier entries of the request. With
// validateOnly the results are the same and no record is written. One
// result per entry.
func (s *State) PlanAlterClientQuotas(alts []QuotaAlteration, validateOnly bool) ([]Record, []error) {
	pending := map[QuotaEntity]map[string]float64{} // entity's values after earlier entries
	current := func(e QuotaEntity) map[string]float64 {
		if m, ok := pending[e]; ok {
			return m
		}
		m := map[string]float64{}
		for k, v := range s.quotas[e] {
			m[k] = v
		}
		pending[e] = m
		return m
	}
	var recs []Record
	res := make([]error, len(alts))
	for i, a := range alts {
		e, err := ParseQuotaEntity(a.Entity)
		if err != nil {
			res[i] = err
			continue
		}
		seen := map[string]bool{}
		var entryRecs []Record
		for _, op := range a.Ops {
			if seen[op.Key] {
				err = fmt.Errorf("%w: Duplicate quota key %s not updating quota for this entity %s", kerr.InvalidRequest, op.Key, e)
				break
			}
			seen[op.Key] = true
			vals := current(e)
			if op.Remove {
				if _, ok := vals[op.Key]; ok {
					entryRecs = append(entryRecs, &ClientQuotaRecord{Entity: e, Key: op.Key, Remove: true})
				}
				continue
			}
			if err = validQuotaValue(e, op.Key, op.Value); err != nil {
				break
			}
			if v, ok := vals[op.Key]; !ok || v != op.Value {
				entryRecs = append(entryRecs, &ClientQuotaRecord{Entity: e, Key: op.Key, Value: op.Value})
			}
		}
		if err != nil {
			res[i] = err
			continue
		}
		vals := current(e)
		for _, r := range entryRecs {
			q := r.(*ClientQuotaRecord)
			if q.Remove {
				delete(vals, q.Key)
			} else {
				vals[q.Key] = q.Value
			}
		}
		if !validateOnly {
			recs = append(recs, entryRecs...)
		}
	}
	return recs, res
}

// encodeQuotaEntity writes an entity: count | (type str, default bool,
// name str)..., in the order user, client-id, ip.
func encodeQuotaEntity(e *encoder, q QuotaEntity) {
	parts := q.Parts()
	e.count(len(parts))
	for _, p := range parts {
		e.str(p.Type)
		e.bool(p.Name == nil)
		if p.Name != nil {
			e.str(*p.Name)
		} else {
			e.str("")
		}
	}
}

func decodeQuotaEntity(d *decoder) QuotaEntity {
	var parts []QuotaEntityPart
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		p := QuotaEntityPart{Type: d.str()}
		def := d.bool()
		name := d.str()
		if !def {
			p.Name = &name
		}
		parts = append(parts, p)
	}
	if d.err != nil {
		return QuotaEntity{}
	}
	e, err := ParseQuotaEntity(parts)
	if err != nil {
		d.fail(fmt.Sprintf("quota entity: %v", err))
		return QuotaEntity{}
	}
	return e
}

func decodeClientQuota(d *decoder) *ClientQuotaRecord {
	r := &ClientQuotaRecord{Entity: decodeQuotaEntity(d)}
	r.Key = d.str()
	r.Value = d.f64()
	r.Remove = d.bool()
	return r
}
