package metadata

// Snapshot encoding of the image.
//
//	+-----------+---------+------------------+------------------------+
//	| magic     | version | crc32c (Castagn.)| body                   |
//	| "SMDI" 4B | uint8   | uint32 BE, body  |                        |
//	+-----------+---------+------------------+------------------------+
//
// body (version 7), in the primitive forms of codec.go, every collection in
// sorted order so that equal images give byte-identical snapshots:
//
//	offset i64 | maxBrokerEpoch i64 | clusterID str ("" if none)
//	features:  count | (name str, level i64)...              by name
//	brokers:   count | (id i32, incarnation uuid, epoch i64,
//	                    listeners count | (name, host, port i32, proto)...,
//	                    rack str, fenced bool, inControlledShutdown bool,
//	                    registrationOffset i64)...           by id
//	topics:    count | (name str, id uuid, partitions count |
//	                    (replicas []i32, isr []i32, leader i32,
//	                     leaderEpoch i32, partitionEpoch i32,
//	                     elr []i32, lastKnownELR []i32,
//	                     leaderRecoveryState u8,
//	                     addingReplicas []i32, removingReplicas []i32)...)...
//	                                                         by name
//	configs:   count | (type u8, name str, count | (k str, v str)...)...
//	                                                         by (type, name, k)
//	remote:    count | (topicID uuid, partition i32, count |
//	                    (segmentID uuid, base i64, end i64, maxTs i64,
//	                     epochs count | (epoch i32, start i64)..., size i64,
//	                     state u8, broker i32, eventTs i64)...)...
//	                                     by (topic, partition), (base, id)
//	removed:   count | (id uuid, name str)...                 by id
//	           (names of removed topics whose remote segments remain)
//	acls:      count | (id uuid, resourceType u8, resourceName str,
//	                    patternType u8, principal str, host str,
//	                    operation u8, permission u8)...        by id
//	scram:     count | (name str, mechanism u8, salt str, storedKey str,
//	                    serverKey str, iterations i32)...     by (name, mechanism)
//	quotas:    count | (entity, count | (key str, value f64)...)...
//	           entity: count | (type str, default bool, name str)...
//	           entities in ClientQuotas order, keys sorted
//
// Format migration: a change bumps the version byte and Unmarshal keeps
// reading older versions; Marshal writes only the newest.
//
//	version 0  no removed section. A removed topic's remote segments are
//	           restored without its name (TopicNameByID: not known).
//	version 1  adds the removed section.
//	version 2  adds clusterID after maxBrokerEpoch. Older images restore
//	           without one; the next leader records it.
//	version 3  adds each partition's elr, lastKnownELR and
//	           leaderRecoveryState (KIP-966, KIP-704). Older images
//	           restore with them empty and RECOVERED.
//	version 4  adds each partition's addingReplicas and removingReplicas
//	           (KIP-455). Older images restore with no reassignment.
//	version 5  adds the acls section. Older images restore without ACLs.
//	version 6  adds the scram section. Older images restore without SCRAM
//	           credentials.
//	version 7  adds the quotas section. Older images restore without
//	           client quotas.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/google/uuid"
)

// ErrCorruptSnapshot is returned by [Unmarshal] for bytes that are not a
// valid snapshot: bad magic, unknown version, checksum mismatch, truncation,
// or contents that violate the image's invariants.
var ErrCorruptSnapshot = errors.New("metadata: corrupt snapshot")

const (
	snapshotMagic   = "SMDI"
	snapshotVersion = 7
	snapshotHeader  = len(snapshotMagic) + 1 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Marshal encodes the image. Equal images (same records applied) give
// byte-identical output. It never fails today; the error is for future
// formats.
func (s *State) Marshal() ([]byte, error) {
	e := encoder{b: make([]byte, snapshotHeader, 4096)}
	copy(e.b, snapshotMagic)
	e.b[len(snapshotMagic)] = snapshotVersion
	e.i64(s.offset)
	e.i64(s.maxBrokerEpoch)
	e.str(s.clusterID)
	e.count(len(s.features))
	for _, name := range sortedKeys(s.features) {
		e.str(name)
		e.i64(int64(s.features[name]))
	}
	e.count(len(s.brokers))
	for _, id := range sortedKeys(s.brokers) {
		b := s.brokers[id]
		e.i32(b.ID)
		e.uuid(b.IncarnationID)
		e.i64(b.Epoch)
		e.count(len(b.Listeners))
		for _, l := range b.Listeners {
			e.str(l.Name)
			e.str(l.Host)
			e.i32(l.Port)
			e.str(l.SecurityProtocol)
		}
		e.str(b.Rack)
		e.bool(b.Fenced)
		e.bool(b.InControlledShutdown)
		e.i64(b.RegistrationOffset)
	}
	e.count(len(s.topics))
	for _, name := range sortedKeys(s.topicsByName) {
		t := s.topics[s.topicsByName[name]]
		e.str(t.name)
		e.uuid(t.id)
		e.count(len(t.partitions))
		for _, p := range t.partitions {
			e.i32s(p.Replicas)
			e.i32s(p.ISR)
			e.i32(p.Leader)
			e.i32(p.LeaderEpoch)
			e.i32(p.PartitionEpoch)
			e.i32s(p.ELR)
			e.i32s(p.LastKnownELR)
			e.u8(uint8(p.LeaderRecoveryState))
			e.i32s(p.AddingReplicas)
			e.i32s(p.RemovingReplicas)
		}
	}
	keys := make([]configKey, 0, len(s.configs))
	for k := range s.configs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b configKey) int {
		if a.typ != b.typ {
			return int(a.typ) - int(b.typ)
		}
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	e.count(len(keys))
	for _, k := range keys {
		m := s.configs[k]
		e.u8(uint8(k.typ))
		e.str(k.name)
		e.count(len(m))
		for _, n := range sortedKeys(m) {
			e.str(n)
			e.str(m[n])
		}
	}
	tps := s.RemotePartitions()
	e.count(len(tps))
	for _, tp := range tps {
		e.uuid(tp.TopicID)
		e.i32(tp.Partition)
		segs := s.RemoteSegments(tp.TopicID, tp.Partition)
		e.count(len(segs))
		for _, g := range segs {
			e.uuid(g.SegmentID)
			e.i64(g.BaseOffset)
			e.i64(g.EndOffset)
			e.i64(g.MaxTimestamp)
			e.count(len(g.LeaderEpochs))
			for _, es := range g.LeaderEpochs {
				e.i32(es.Epoch)
				e.i64(es.StartOffset)
			}
			e.i64(g.SizeBytes)
			e.u8(uint8(g.State))
			e.i32(g.BrokerID)
			e.i64(g.EventTimestamp)
		}
	}
	removed := make([]uuid.UUID, 0, len(s.removedNames))
	for id := range s.removedNames {
		removed = append(removed, id)
	}
	slices.SortFunc(removed, compareUUID)
	e.count(len(removed))
	for _, id := range removed {
		e.uuid(id)
		e.str(s.removedNames[id])
	}
	acls := s.ACLs()
	e.count(len(acls))
	for _, a := range acls {
		e.uuid(a.ID)
		e.u8(uint8(a.ResourceType))
		e.str(a.ResourceName)
		e.u8(uint8(a.PatternType))
		e.str(a.Principal)
		e.str(a.Host)
		e.u8(uint8(a.Operation))
		e.u8(uint8(a.Permission))
	}
	creds := s.ScramCredentials()
	e.count(len(creds))
	for _, c := range creds {
		encodeScram(&e, &UserScramCredentialRecord{Name: c.Name, Mechanism: c.Mechanism, Salt: c.Salt,
			StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int32(c.Iterations)})
	}
	quotas := s.ClientQuotas()
	e.count(len(quotas))
	for _, q := range quotas {
		encodeQuotaEntity(&e, q.Entity)
		e.count(len(q.Values))
		for _, k := range sortedKeys(q.Values) {
			e.str(k)
			e.f64(q.Values[k])
		}
	}
	putCRC(e.b)
	return e.b, nil
}

// putCRC writes the checksum of a snapshot's body into its header.
func putCRC(b []byte) {
	binary.BigEndian.PutUint32(b[len(snapshotMagic)+1:], crc32.Checksum(b[snapshotHeader:], castagnoli))
}

// Unmarshal decodes a snapshot written by [State.Marshal]. It never panics;
// anything but a valid snapshot yields [ErrCorruptSnapshot] (wrapped). The
// returned state does not alias b.
func Unmarshal(b []byte) (*State, error) {
	if len(b) < snapshotHeader || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: bad header", ErrCorruptSnapshot)
	}
	v := b[len(snapshotMagic)]
	if v > snapshotVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	body := b[snapshotHeader:]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(snapshotMagic)+1:]); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorruptSnapshot, got, want)
	}
	s, err := decodeSnapshot(&decoder{b: body}, v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	return s, nil
}

func decodeSnapshot(d *decoder, version uint8) (*State, error) {
	s := NewState()
	s.offset = d.i64()
	s.maxBrokerEpoch = d.i64()
	if version >= 2 {
		if s.clusterID = d.str(); s.clusterID != "" && d.err == nil {
			if err := validClusterID(s.clusterID); err != nil {
				return nil, fmt.Errorf("cluster id: %v", err)
			}
		}
	}
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		name := d.str()
		lvl := d.i64()
		if lvl <= 0 || lvl > math.MaxInt16 {
			return nil, fmt.Errorf("feature %q level %d", name, lvl)
		}
		s.features[name] = int16(lvl)
	}
	for n := d.count(20); n > 0 && d.err == nil; n-- {
		b := &BrokerInfo{ID: d.i32(), IncarnationID: d.uuid(), Epoch: d.i64()}
		if k := d.count(4); k > 0 {
			b.Listeners = make([]Listener, k)
			for i := range b.Listeners {
				b.Listeners[i] = Listener{Name: d.str(), Host: d.str(), Port: d.i32(), SecurityProtocol: d.str()}
			}
		}
		b.Rack = d.str()
		b.Fenced = d.bool()
		b.InControlledShutdown = d.bool()
		b.RegistrationOffset = d.i64()
		if d.err != nil {
			break
		}
		if _, dup := s.brokers[b.ID]; dup || b.ID < 0 || b.Epoch > s.maxBrokerEpoch {
			return nil, fmt.Errorf("broker %d duplicate or out of range", b.ID)
		}
		s.brokers[b.ID] = b
	}
	for n := d.count(18); n > 0 && d.err == nil; n-- {
		t := &topicState{name: d.str(), id: d.uuid()}
		if err := s.applyTopic(&TopicRecord{Name: t.name, TopicID: t.id}); err != nil && d.err == nil {
			return nil, err
		}
		for k := d.count(5); k > 0 && d.err == nil; k-- {
			rec := &PartitionRecord{TopicID: t.id, Partition: int32(len(s.topics[t.id].partitions))}
			rec.Replicas = d.i32s()
			rec.ISR = d.i32s()
			rec.Leader = d.i32()
			rec.LeaderEpoch = d.i32()
			rec.PartitionEpoch = d.i32()
			if version >= 3 {
				rec.ELR = d.i32s()
				rec.LastKnownELR = d.i32s()
				rec.LeaderRecoveryState = int8(d.u8())
			}
			if version >= 4 {
				rec.AddingReplicas = d.i32s()
				rec.RemovingReplicas = d.i32s()
			}
			if d.err != nil {
				break
			}
			if err := s.applyPartition(rec); err != nil {
				return nil, err
			}
		}
	}
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		typ, name := ResourceType(d.u8()), d.str()
		for k := d.count(2); k > 0 && d.err == nil; k-- {
			key, val := d.str(), d.str()
			if d.err != nil {
				break
			}
			if err := s.applyConfig(&ConfigRecord{ResourceType: typ, ResourceName: name, Name: key, Value: &val}); err != nil {
				return nil, err
			}
		}
	}
	for n := d.count(18); n > 0 && d.err == nil; n-- {
		tp := TopicPartition{TopicID: d.uuid(), Partition: d.i32()}
		for k := d.count(24); k > 0 && d.err == nil; k-- {
			g := &RemoteSegmentInfo{SegmentID: d.uuid(), TopicID: tp.TopicID, Partition: tp.Partition}
			g.BaseOffset = d.i64()
			g.EndOffset = d.i64()
			g.MaxTimestamp = d.i64()
			if e := d.count(2); e > 0 {
				g.LeaderEpochs = make([]EpochStart, e)
				for i := range g.LeaderEpochs {
					g.LeaderEpochs[i] = EpochStart{Epoch: d.i32(), StartOffset: d.i64()}
				}
			}
			g.SizeBytes = d.i64()
			g.State = RemoteSegmentState(d.u8())
			g.BrokerID = d.i32()
			g.EventTimestamp = d.i64()
			if d.err != nil {
				break
			}
			if err := s.restoreSegment(g); err != nil {
				return nil, err
			}
		}
	}
	if version >= 1 {
		if err := s.restoreRemovedNames(d); err != nil {
			return nil, err
		}
	}
	if version >= 5 {
		var prev uuid.UUID
		for n := d.count(24); n > 0 && d.err == nil; n-- {
			r := decodeACL(d)
			if d.err != nil {
				break
			}
			if len(s.acls) > 0 && compareUUID(prev, r.ID) >= 0 {
				return nil, fmt.Errorf("acl %s out of order", r.ID)
			}
			prev = r.ID
			if err := s.applyACL(r); err != nil {
				return nil, err
			}
		}
	}
	if version >= 6 {
		var prev scramKey
		for n := d.count(8); n > 0 && d.err == nil; n-- {
			r := decodeScram(d)
			if d.err != nil {
				break
			}
			k := scramKey{r.Name, r.Mechanism}
			if len(s.scram) > 0 && cmp.Or(cmp.Compare(prev.name, k.name), cmp.Compare(prev.mech, k.mech)) >= 0 {
				return nil, fmt.Errorf("scram credential %q %s out of order", r.Name, r.Mechanism)
			}
			prev = k
			if err := s.applyScram(r); err != nil {
				return nil, err
			}
		}
	}
	if version >= 7 {
		if err := s.restoreQuotas(d); err != nil {
			return nil, err
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return nil, d.err
	}
	return s, nil
}

// restoreSegment adds a segment read from a snapshot. Unlike a new
// segment in Apply, its partition may be gone (its topic was deleted).
func (s *State) restoreSegment(g *RemoteSegmentInfo) error {
	rec := &RemoteSegmentRecord{SegmentID: g.SegmentID, BaseOffset: g.BaseOffset, EndOffset: g.EndOffset, SizeBytes: g.SizeBytes, LeaderEpochs: g.LeaderEpochs}
	if err := checkSegment(rec); err != nil {
		return fmt.Errorf("segment %s: %v", g.SegmentID, err)
	}
	if g.State >= DeleteFinished {
		return fmt.Errorf("segment %s in state %s", g.SegmentID, g.State)
	}
	tp := TopicPartition{g.TopicID, g.Partition}
	m := s.remote[tp]
	if m == nil {
		m = map[uuid.UUID]*RemoteSegmentInfo{}
		s.remote[tp] = m
		s.remoteTopics[tp.TopicID]++
	}
	if _, dup := m[g.SegmentID]; dup {
		return fmt.Errorf("segment %s repeated", g.SegmentID)
	}
	m[g.SegmentID] = g
	return nil
}

// restoreRemovedNames reads the removed section (version 1). Each entry
// must be what Apply could have left: in ascending id order (so accepted
// bytes re-marshal identically), a valid name, an ID no live topic has,
// with remote segments still in the image (read before this section).
func (s *State) restoreRemovedNames(d *decoder) error {
	var prev uuid.UUID
	for n := d.count(17); n > 0 && d.err == nil; n-- {
		id, name := d.uuid(), d.str()
		if d.err != nil {
			break
		}
		if len(s.removedNames) > 0 && compareUUID(prev, id) >= 0 {
			return fmt.Errorf("removed topic %s out of order", id)
		}
		prev = id
		if err := validTopicName(name); err != nil {
			return fmt.Errorf("removed topic %s: %v", id, err)
		}
		if _, live := s.topics[id]; live || !s.hasRemote(id) {
			return fmt.Errorf("removed topic %s is live or has no remote segments", id)
		}
		s.removedNames[id] = name
	}
	return nil
}

// restoreQuotas reads the quotas section (version 7): entities in
// ClientQuotas order, each with at least one key, keys ascending, every
// value one ClientQuotaRecord could have set.
func (s *State) restoreQuotas(d *decoder) error {
	var prev QuotaEntity
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		e := decodeQuotaEntity(d)
		if d.err != nil {
			break
		}
		if len(s.quotas) > 0 && compareQuotaEntity(prev, e) >= 0 {
			return fmt.Errorf("quota entity %s out of order", e)
		}
		prev = e
		keys := d.count(9)
		if d.err == nil && keys == 0 {
			return fmt.Errorf("quota entity %s without values", e)
		}
		last := ""
		for i := 0; i < keys && d.err == nil; i++ {
			k, v := d.str(), d.f64()
			if d.err != nil {
				break
			}
			if i > 0 && k <= last {
				return fmt.Errorf("quota %s of %s out of order", k, e)
			}
			last = k
			if err := s.applyClientQuota(&ClientQuotaRecord{Entity: e, Key: k, Value: v}); err != nil {
				return err
			}
		}
	}
	return nil
}
