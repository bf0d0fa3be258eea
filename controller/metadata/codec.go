package metadata

// Record encoding.
//
// Every record is framed as
//
//	+--------+---------+------------------------------+
//	| type   | version | payload                      |
//	| uint8  | uint8   | version-specific, see below  |
//	+--------+---------+------------------------------+
//
// and the payload is a fixed sequence of fields, each in one of these forms:
//
//	int32, int64, int16   zig-zag varint (encoding/binary.AppendVarint)
//	count, length         unsigned varint
//	bool                  one byte, 0 or 1
//	uuid                  16 raw bytes
//	string                length | bytes (UTF-8 not checked)
//	float64               8 bytes, IEEE 754 bits big endian
//	*T                    one presence byte (0 absent, 1 present) | T
//	[]T                   count | T...   ([]int32 nil vs empty: see below)
//
// Optional slices ("nil = unchanged" in PartitionChangeRecord) are *[]T: a
// presence byte then the slice. The payload must be consumed exactly:
// trailing bytes are corruption. Raft already checksums its entries, so
// records carry no CRC of their own.
//
// Format migration: PartitionRecord and PartitionChangeRecord are at
// version 2, RemoteSegmentRecord at version 1, every other record type at
// version 0.
//
//	PartitionRecord v1        adds elr []i32, lastKnownELR []i32,
//	                          leaderRecoveryState u8 after partitionEpoch
//	PartitionChangeRecord v1  adds elr *[]i32, lastKnownELR *[]i32,
//	                          leaderRecoveryState *u8 after replicas
//	RemoteSegmentRecord v1    adds writerLeaderEpoch i32 after eventTimestamp
//	PartitionRecord v2        adds addingReplicas []i32, removingReplicas
//	                          []i32 after leaderRecoveryState (KIP-455)
//	PartitionChangeRecord v2  adds addingReplicas *[]i32, removingReplicas
//	                          *[]i32 after leaderRecoveryState
//
// Older records decode with the fields they lack empty (nil: no
// reassignment in progress, unchanged for a change),
// LeaderRecovered (unchanged, for a change) and, for a remote segment,
// writerLeaderEpoch UnknownLeaderEpoch (not fenced: written before fencing). A new field is added
// by bumping that record's version constant in records.go, writing the field
// after the existing ones, and decoding older versions with the field at its
// zero value. Decode keeps accepting every version it ever wrote.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/strata-io/strata/broker/authz"
)

// ErrUnknownRecord is returned by [Decode] for a record type or version this
// build does not know.
var ErrUnknownRecord = errors.New("metadata: unknown record type or version")

// ErrCorruptRecord is returned by [Decode] (and [Unmarshal]) for bytes that
// do not parse: truncated, overlong, out-of-range values, trailing bytes.
var ErrCorruptRecord = errors.New("metadata: corrupt record")

// Encode returns the encoding of r. It panics only if r is not one of this
// package's record types (a programming error). The returned slice is new
// and owned by the caller.
func Encode(r Record) []byte {
	return AppendRecord(make([]byte, 0, 64), r)
}

// AppendRecord appends the encoding of r to b and returns the extended slice.
func AppendRecord(b []byte, r Record) []byte {
	e := encoder{b: b}
	e.u8(uint8(r.Type()))
	e.u8(r.Version())
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		e.i32(r.BrokerID)
		e.uuid(r.IncarnationID)
		e.i64(r.BrokerEpoch)
		e.count(len(r.Listeners))
		for _, l := range r.Listeners {
			e.str(l.Name)
			e.str(l.Host)
			e.i32(l.Port)
			e.str(l.SecurityProtocol)
		}
		e.str(r.Rack)
		e.bool(r.Fenced)
	case *UnregisterBrokerRecord:
		e.i32(r.BrokerID)
		e.i64(r.BrokerEpoch)
	case *BrokerRegistrationChangeRecord:
		e.i32(r.BrokerID)
		e.i64(r.BrokerEpoch)
		e.optBool(r.Fenced)
		e.optBool(r.InControlledShutdown)
	case *TopicRecord:
		e.str(r.Name)
		e.uuid(r.TopicID)
	case *PartitionRecord:
		e.uuid(r.TopicID)
		e.i32(r.Partition)
		e.i32s(r.Replicas)
		e.i32s(r.ISR)
		e.i32(r.Leader)
		e.i32(r.LeaderEpoch)
		e.i32(r.PartitionEpoch)
		e.i32s(r.ELR)
		e.i32s(r.LastKnownELR)
		e.u8(uint8(r.LeaderRecoveryState))
		e.i32s(r.AddingReplicas)
		e.i32s(r.RemovingReplicas)
	case *PartitionChangeRecord:
		e.uuid(r.TopicID)
		e.i32(r.Partition)
		if r.Leader == nil {
			e.bool(false)
		} else {
			e.bool(true)
			e.i32(*r.Leader)
		}
		e.optI32s(r.ISR)
		e.optI32s(r.Replicas)
		e.optI32s(r.ELR)
		e.optI32s(r.LastKnownELR)
		if r.LeaderRecoveryState == nil {
			e.bool(false)
		} else {
			e.bool(true)
			e.u8(uint8(*r.LeaderRecoveryState))
		}
		e.optI32s(r.AddingReplicas)
		e.optI32s(r.RemovingReplicas)
	case *ConfigRecord:
		e.u8(uint8(r.ResourceType))
		e.str(r.ResourceName)
		e.str(r.Name)
		if r.Value == nil {
			e.bool(false)
		} else {
			e.bool(true)
			e.str(*r.Value)
		}
	case *RemoveTopicRecord:
		e.uuid(r.TopicID)
	case *RemoteSegmentRecord:
		e.uuid(r.SegmentID)
		e.uuid(r.TopicID)
		e.i32(r.Partition)
		e.i64(r.BaseOffset)
		e.i64(r.EndOffset)
		e.i64(r.MaxTimestamp)
		e.count(len(r.LeaderEpochs))
		for _, es := range r.LeaderEpochs {
			e.i32(es.Epoch)
			e.i64(es.StartOffset)
		}
		e.i64(r.SizeBytes)
		e.u8(uint8(r.State))
		e.i32(r.BrokerID)
		e.i64(r.EventTimestamp)
		e.i32(r.WriterLeaderEpoch)
	case *NoOpRecord:
	case *FeatureLevelRecord:
		e.str(r.Name)
		e.i64(int64(r.Level))
	case *ClusterIDRecord:
		e.str(r.ClusterID)
	case *AccessControlEntryRecord:
		e.uuid(r.ID)
		e.u8(uint8(r.ResourceType))
		e.str(r.ResourceName)
		e.u8(uint8(r.PatternType))
		e.str(r.Principal)
		e.str(r.Host)
		e.u8(uint8(r.Operation))
		e.u8(uint8(r.Permission))
	case *RemoveAccessControlEntryRecord:
		e.uuid(r.ID)
	case *UserScramCredentialRecord:
		encodeScram(&e, r)
	case *RemoveUserScramCredentialRecord:
		e.str(r.Name)
		e.u8(uint8(r.Mechanism))
	case *ClientQuotaRecord:
		encodeQuotaEntity(&e, r.Entity)
		e.str(r.Key)
		e.f64(r.Value)
		e.bool(r.Remove)
	default:
		panic(fmt.Sprintf("metadata: Encode of foreign record type %T", r))
	}
	return e.b
}

// Decode parses one encoded record. It never panics: garbage yields
// [ErrCorruptRecord] or [ErrUnknownRecord] (wrapped with detail). The
// returned record does not alias b.
func Decode(b []byte) (Record, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, need at least 2", ErrCorruptRecord, len(b))
	}
	t, v := RecordType(b[0]), b[1]
	d := decoder{b: b[2:]}
	var r Record
	switch t {
	case TypeRegisterBroker:
		if v > versionRegisterBroker {
			break
		}
		x := &RegisterBrokerRecord{}
		x.BrokerID = d.i32()
		x.IncarnationID = d.uuid()
		x.BrokerEpoch = d.i64()
		if n := d.count(4); n > 0 {
			x.Listeners = make([]Listener, n)
			for i := range x.Listeners {
				l := &x.Listeners[i]
				l.Name = d.str()
				l.Host = d.str()
				l.Port = d.i32()
				l.SecurityProtocol = d.str()
			}
		}
		x.Rack = d.str()
		x.Fenced = d.bool()
		r = x
	case TypeUnregisterBroker:
		if v > versionUnregisterBroker {
			break
		}
		r = &UnregisterBrokerRecord{BrokerID: d.i32(), BrokerEpoch: d.i64()}
	case TypeBrokerRegistrationChange:
		if v > versionBrokerRegistrationChange {
			break
		}
		x := &BrokerRegistrationChangeRecord{BrokerID: d.i32(), BrokerEpoch: d.i64()}
		x.Fenced = d.optBool()
		x.InControlledShutdown = d.optBool()
		r = x
	case TypeTopic:
		if v > versionTopic {
			break
		}
		r = &TopicRecord{Name: d.str(), TopicID: d.uuid()}
	case TypePartition:
		if v > versionPartition {
			break
		}
		x := &PartitionRecord{TopicID: d.uuid(), Partition: d.i32()}
		x.Replicas = d.i32s()
		x.ISR = d.i32s()
		x.Leader = d.i32()
		x.LeaderEpoch = d.i32()
		x.PartitionEpoch = d.i32()
		if v >= 1 {
			x.ELR = nilIfEmpty(d.i32s())
			x.LastKnownELR = nilIfEmpty(d.i32s())
			x.LeaderRecoveryState = int8(d.u8())
		}
		if v >= 2 {
			x.AddingReplicas = nilIfEmpty(d.i32s())
			x.RemovingReplicas = nilIfEmpty(d.i32s())
		}
		r = x
	case TypePartitionChange:
		if v > versionPartitionChange {
			break
		}
		x := &PartitionChangeRecord{TopicID: d.uuid(), Partition: d.i32()}
		if d.bool() {
			l := d.i32()
			x.Leader = &l
		}
		x.ISR = d.optI32s()
		x.Replicas = d.optI32s()
		if v >= 1 {
			x.ELR = d.optI32s()
			x.LastKnownELR = d.optI32s()
			if d.bool() {
				lrs := int8(d.u8())
				x.LeaderRecoveryState = &lrs
			}
		}
		if v >= 2 {
			x.AddingReplicas = d.optI32s()
			x.RemovingReplicas = d.optI32s()
		}
		r = x
	case TypeConfig:
		if v > versionConfig {
			break
		}
		x := &ConfigRecord{ResourceType: ResourceType(d.u8())}
		x.ResourceName = d.str()
		x.Name = d.str()
		if d.bool() {
			s := d.str()
			x.Value = &s
		}
		r = x
	case TypeRemoveTopic:
		if v > versionRemoveTopic {
			break
		}
		r = &RemoveTopicRecord{TopicID: d.uuid()}
	case TypeRemoteSegment:
		if v > versionRemoteSegment {
			break
		}
		x := &RemoteSegmentRecord{SegmentID: d.uuid(), TopicID: d.uuid(), Partition: d.i32()}
		x.BaseOffset = d.i64()
		x.EndOffset = d.i64()
		x.MaxTimestamp = d.i64()
		if n := d.count(2); n > 0 {
			x.LeaderEpochs = make([]EpochStart, n)
			for i := range x.LeaderEpochs {
				x.LeaderEpochs[i] = EpochStart{Epoch: d.i32(), StartOffset: d.i64()}
			}
		}
		x.SizeBytes = d.i64()
		x.State = RemoteSegmentState(d.u8())
		x.BrokerID = d.i32()
		x.EventTimestamp = d.i64()
		x.WriterLeaderEpoch = UnknownLeaderEpoch
		if v >= 1 {
			x.WriterLeaderEpoch = d.i32()
		}
		r = x
	case TypeNoOp:
		if v > versionNoOp {
			break
		}
		r = &NoOpRecord{}
	case TypeFeatureLevel:
		if v > versionFeatureLevel {
			break
		}
		x := &FeatureLevelRecord{Name: d.str()}
		lvl := d.i64()
		if lvl < math.MinInt16 || lvl > math.MaxInt16 {
			d.fail("feature level out of range")
		}
		x.Level = int16(lvl)
		r = x
	case TypeClusterID:
		if v > versionClusterID {
			break
		}
		r = &ClusterIDRecord{ClusterID: d.str()}
	case TypeAccessControlEntry:
		if v > versionAccessControlEntry {
			break
		}
		r = decodeACL(&d)
	case TypeRemoveAccessControlEntry:
		if v > versionRemoveAccessControlEntry {
			break
		}
		r = &RemoveAccessControlEntryRecord{ID: d.uuid()}
	case TypeUserScramCredential:
		if v > versionUserScramCredential {
			break
		}
		r = decodeScram(&d)
	case TypeRemoveUserScramCredential:
		if v > versionRemoveUserScramCredential {
			break
		}
		r = &RemoveUserScramCredentialRecord{Name: d.str(), Mechanism: ScramMechanism(d.u8())}
	case TypeClientQuota:
		if v > versionClientQuota {
			break
		}
		r = decodeClientQuota(&d)
	}
	if r == nil {
		return nil, fmt.Errorf("%w: type %d version %d", ErrUnknownRecord, uint8(t), v)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrCorruptRecord, t, d.err)
	}
	if err := checkEnums(r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, t, err)
	}
	return r, nil
}

// decodeACL reads an AccessControlEntryRecord's fields (also the acls
// section of a snapshot).
func decodeACL(d *decoder) *AccessControlEntryRecord {
	x := &AccessControlEntryRecord{ID: d.uuid()}
	x.ResourceType = authz.ResourceType(d.u8())
	x.ResourceName = d.str()
	x.PatternType = authz.PatternType(d.u8())
	x.Principal = d.str()
	x.Host = d.str()
	x.Operation = authz.Operation(d.u8())
	x.Permission = authz.Permission(d.u8())
	return x
}

// encodeScram writes a UserScramCredentialRecord's fields (also the scram
// section of a snapshot):
//
//	name str | mechanism u8 | salt str | storedKey str | serverKey str | iterations i32
func encodeScram(e *encoder, r *UserScramCredentialRecord) {
	e.str(r.Name)
	e.u8(uint8(r.Mechanism))
	e.str(string(r.Salt))
	e.str(string(r.StoredKey))
	e.str(string(r.ServerKey))
	e.i32(r.Iterations)
}

// decodeScram reads what encodeScram wrote.
func decodeScram(d *decoder) *UserScramCredentialRecord {
	x := &UserScramCredentialRecord{Name: d.str(), Mechanism: ScramMechanism(d.u8())}
	x.Salt = []byte(d.str())
	x.StoredKey = []byte(d.str())
	x.ServerKey = []byte(d.str())
	x.Iterations = d.i32()
	return x
}

// checkEnums rejects enum values no version of the encoder writes.
func checkEnums(r Record) error {
	switch r := r.(type) {
	case *ConfigRecord:
		if r.ResourceType != ResourceTopic && r.ResourceType != ResourceBroker && r.ResourceType != ResourceGroup {
			return fmt.Errorf("resource type %d", r.ResourceType)
		}
	case *RemoteSegmentRecord:
		if r.State > DeleteFinished {
			return fmt.Errorf("segment state %d", r.State)
		}
	case *PartitionRecord:
		if r.LeaderRecoveryState != LeaderRecovered && r.LeaderRecoveryState != LeaderRecovering {
			return fmt.Errorf("leader recovery state %d", r.LeaderRecoveryState)
		}
	case *PartitionChangeRecord:
		if l := r.LeaderRecoveryState; l != nil && *l != LeaderRecovered && *l != LeaderRecovering {
			return fmt.Errorf("leader recovery state %d", *l)
		}
	case *AccessControlEntryRecord:
		// Planners write only bindings authz.ValidateACL accepts.
		return authz.ValidateACL(r.ACL)
	case *UserScramCredentialRecord:
		// Planners write only credentials Apply accepts.
		return validateScramRecord(r)
	case *RemoveUserScramCredentialRecord:
		if r.Mechanism.keySize() == 0 {
			return fmt.Errorf("scram mechanism %d", r.Mechanism)
		}
	case *ClientQuotaRecord:
		return checkQuotaRecord(r)
	}
	return nil
}

// nilIfEmpty normalises an empty slice to nil: the image keeps an empty
// ELR as nil, whichever way it arrived.
func nilIfEmpty(v []int32) []int32 {
	if len(v) == 0 {
		return nil
	}
	return v
}

// encoder appends the primitive forms described at the top of this file.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)       { e.b = append(e.b, v) }
func (e *encoder) i32(v int32)      { e.b = binary.AppendVarint(e.b, int64(v)) }
func (e *encoder) i64(v int64)      { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) count(n int)      { e.b = binary.AppendUvarint(e.b, uint64(n)) }
func (e *encoder) uuid(u uuid.UUID) { e.b = append(e.b, u[:]...) }
func (e *encoder) f64(v float64)    { e.b = binary.BigEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *encoder) str(s string) {
	e.count(len(s))
	e.b = append(e.b, s...)
}
func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *encoder) optBool(v *bool) {
	if v == nil {
		e.u8(0)
		return
	}
	e.u8(1)
	e.bool(*v)
}
func (e *encoder) i32s(v []int32) {
	e.count(len(v))
	for _, x := range v {
		e.i32(x)
	}
}
func (e *encoder) optI32s(v []int32) {
	if v == nil {
		e.u8(0)
		return
	}
	e.u8(1)
	e.i32s(v)
}

// decoder reads the primitive forms. After the first failure every read
// returns a zero value and err keeps the first cause, so callers decode a
// whole record and check err once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = errors.New(why)
	}
	d.b = nil
}

func (d *decoder) u8() uint8 {
	if len(d.b) < 1 {
		d.fail("short read")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) i64() int64 { return d.varint() }

func (d *decoder) f64() float64 {
	if len(d.b) < 8 {
		d.fail("short float64")
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *decoder) i32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int32 out of range")
		return 0
	}
	return int32(v)
}

// count reads an element count and checks it against the bytes left, given
// that each element takes at least minSize bytes, so a corrupt count can
// never make Decode allocate more than the input's size.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/minSize) {
		d.fail("count exceeds remaining bytes")
		return 0
	}
	return int(n)
}

func (d *decoder) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad bool")
	return false
}

func (d *decoder) optBool() *bool {
	if !d.bool() {
		return nil
	}
	v := d.bool()
	if d.err != nil {
		return nil
	}
	return &v
}

func (d *decoder) uuid() uuid.UUID {
	var u uuid.UUID
	if len(d.b) < 16 {
		d.fail("short uuid")
		return u
	}
	copy(u[:], d.b)
	d.b = d.b[16:]
	return u
}

func (d *decoder) str() string {
	n := d.count(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// i32s returns a non-nil slice (possibly empty) so that a decoded record
// compares equal to one built with literal empty slices only when the
// encoder saw an empty slice: required slices are normalised to non-nil.
func (d *decoder) i32s() []int32 {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = d.i32()
	}
	return v
}

func (d *decoder) optI32s() []int32 {
	if !d.bool() {
		return nil
	}
	return d.i32s()
}

// Batches.
//
// A planner's records must take effect together (a fencing is a broker
// change plus partition changes), so the controller proposes them as one
// Raft entry:
//
//	+------------------+--------------------+---------------+-----
//	| count (uvarint)  | len (uvarint)      | record        | len | record ...
//	+------------------+--------------------+---------------+-----
//
// where each record is in the form [Encode] writes.

// EncodeBatch returns the encoding of recs as one batch.
func EncodeBatch(recs []Record) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 64*len(recs)+1), uint64(len(recs)))
	var tmp []byte
	for _, r := range recs {
		tmp = AppendRecord(tmp[:0], r)
		b = binary.AppendUvarint(b, uint64(len(tmp)))
		b = append(b, tmp...)
	}
	return b
}

// DecodeBatch parses a batch written by [EncodeBatch]. Like [Decode] it
// never panics and returns [ErrCorruptRecord] or [ErrUnknownRecord]
// (wrapped); the records do not alias b.
func DecodeBatch(b []byte) ([]Record, error) {
	d := decoder{b: b}
	n := d.count(3) // a record takes at least a length byte and 2 bytes
	if d.err != nil {
		return nil, fmt.Errorf("%w: batch: %s", ErrCorruptRecord, d.err)
	}
	recs := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		l := d.count(1)
		if d.err != nil {
			return nil, fmt.Errorf("%w: batch record %d: %s", ErrCorruptRecord, i, d.err)
		}
		r, err := Decode(d.b[:l])
		if err != nil {
			return nil, fmt.Errorf("batch record %d: %w", i, err)
		}
		d.b = d.b[l:]
		recs = append(recs, r)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: batch: %d trailing bytes", ErrCorruptRecord, len(d.b))
	}
	return recs, nil
}
