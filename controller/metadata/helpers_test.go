package metadata

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/sasl"
)

// harness drives a State through datadriven scripts: each planning command
// plans against the state, prints the planned records and the result, and
// applies the records at consecutive offsets, as the controller would after
// commit.
type harness struct {
	st     *State
	rng    *rand.Rand
	next   int64                // next offset to apply at
	names  map[uuid.UUID]string // topic and segment IDs → script names, kept after deletion
	incarn map[int32]int        // broker id → incarnation counter
}

func newHarness() *harness {
	return &harness{
		st:     NewState(),
		rng:    rand.New(rand.NewPCG(1, 2)),
		names:  map[uuid.UUID]string{},
		incarn: map[int32]int{},
	}
}

// scriptTopicID is the topic ID a script gives with create-topic id=name.
func scriptTopicID(name string) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("topic/"+name))
}

// segID names a remote segment deterministically from its script name.
func segID(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte("segment/"+name)) }

// incarnationID names broker id's n-th incarnation.
func incarnationID(id int32, n int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("broker/%d/%d", id, n)))
}

func (h *harness) name(id uuid.UUID) string {
	if n, ok := h.names[id]; ok {
		return n
	}
	return id.String()
}

func (h *harness) tp(id uuid.UUID, p int32) string { return fmt.Sprintf("%s-%d", h.name(id), p) }

func ints(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// format prints a record compactly, with IDs replaced by script names.
func (h *harness) format(r Record) string {
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		return fmt.Sprintf("RegisterBroker id=%d epoch=%d rack=%q fenced=%t", r.BrokerID, r.BrokerEpoch, r.Rack, r.Fenced)
	case *UnregisterBrokerRecord:
		return fmt.Sprintf("UnregisterBroker id=%d epoch=%d", r.BrokerID, r.BrokerEpoch)
	case *BrokerRegistrationChangeRecord:
		s := fmt.Sprintf("BrokerChange id=%d epoch=%d", r.BrokerID, r.BrokerEpoch)
		if r.Fenced != nil {
			s += fmt.Sprintf(" fenced=%t", *r.Fenced)
		}
		if r.InControlledShutdown != nil {
			s += fmt.Sprintf(" shutting-down=%t", *r.InControlledShutdown)
		}
		return s
	case *TopicRecord:
		if n := h.name(r.TopicID); n != r.Name { // an ID the script gave
			return "Topic " + r.Name + " id=" + n
		}
		return "Topic " + r.Name
	case *PartitionRecord:
		s := fmt.Sprintf("Partition %s replicas=%s isr=%s leader=%d", h.tp(r.TopicID, r.Partition), ints(r.Replicas), ints(r.ISR), r.Leader)
		if r.ELR != nil || r.LastKnownELR != nil || r.LeaderRecoveryState != LeaderRecovered {
			s += fmt.Sprintf(" elr=%s last-known-elr=%s recovery=%d", ints(r.ELR), ints(r.LastKnownELR), r.LeaderRecoveryState)
		}
		return s
	case *PartitionChangeRecord:
		s := "PartitionChange " + h.tp(r.TopicID, r.Partition)
		if r.Leader != nil {
			s += fmt.Sprintf(" leader=%d", *r.Leader)
		}
		if r.ISR != nil {
			s += " isr=" + ints(r.ISR)
		}
		if r.Replicas != nil {
			s += " replicas=" + ints(r.Replicas)
		}
		if r.ELR != nil {
			s += " elr=" + ints(r.ELR)
		}
		if r.LastKnownELR != nil {
			s += " last-known-elr=" + ints(r.LastKnownELR)
		}
		if r.LeaderRecoveryState != nil {
			s += " recovery=" + recoveryName(*r.LeaderRecoveryState)
		}
		if r.AddingReplicas != nil {
			s += " adding=" + ints(r.AddingReplicas)
		}
		if r.RemovingReplicas != nil {
			s += " removing=" + ints(r.RemovingReplicas)
		}
		return s
	case *ConfigRecord:
		if r.Value == nil {
			return fmt.Sprintf("Config %s/%s %s deleted", r.ResourceType, r.ResourceName, r.Name)
		}
		return fmt.Sprintf("Config %s/%s %s=%s", r.ResourceType, r.ResourceName, r.Name, *r.Value)
	case *RemoveTopicRecord:
		return "RemoveTopic " + h.name(r.TopicID)
	case *RemoteSegmentRecord:
		w := ""
		if r.WriterLeaderEpoch != UnknownLeaderEpoch {
			w = fmt.Sprintf(" leader-epoch=%d", r.WriterLeaderEpoch)
		}
		return fmt.Sprintf("RemoteSegment %s %s %s [%d,%d] broker=%d%s", h.tp(r.TopicID, r.Partition), h.name(r.SegmentID), r.State, r.BaseOffset, r.EndOffset, r.BrokerID, w)
	case *NoOpRecord:
		return "NoOp"
	case *FeatureLevelRecord:
		return fmt.Sprintf("FeatureLevel %s=%d", r.Name, r.Level)
	case *ClusterIDRecord:
		return "ClusterID " + r.ClusterID
	case *AccessControlEntryRecord:
		return fmt.Sprintf("AccessControlEntry %s %s", h.name(r.ID), r.ACL)
	case *RemoveAccessControlEntryRecord:
		return "RemoveAccessControlEntry " + h.name(r.ID)
	case *UserScramCredentialRecord:
		return fmt.Sprintf("UserScramCredential %s %s iterations=%d salt=%q stored=%x.. server=%x..", r.Name, r.Mechanism,
			r.Iterations, r.Salt, r.StoredKey[:4], r.ServerKey[:4])
	case *RemoveUserScramCredentialRecord:
		return fmt.Sprintf("RemoveUserScramCredential %s %s", r.Name, r.Mechanism)
	case *ClientQuotaRecord:
		if r.Remove {
			return fmt.Sprintf("ClientQuota %s %s removed", r.Entity, r.Key)
		}
		return fmt.Sprintf("ClientQuota %s %s=%v", r.Entity, r.Key, r.Value)
	}
	return fmt.Sprintf("%T", r)
}

func recoveryName(l int8) string {
	switch l {
	case LeaderRecovered:
		return "RECOVERED"
	case LeaderRecovering:
		return "RECOVERING"
	}
	return strconv.Itoa(int(l))
}

// apply applies planned records, round-tripping each through the codec as
// the Raft log would, and prints them.
func (h *harness) apply(t testing.TB, out *strings.Builder, recs []Record) {
	t.Helper()
	for _, r := range recs {
		dec, err := Decode(Encode(r))
		if err != nil {
			t.Fatalf("decode of planned %s: %v", h.format(r), err)
		}
		if ar, ok := dec.(*AccessControlEntryRecord); ok {
			if _, named := h.names[ar.ID]; !named {
				h.names[ar.ID] = fmt.Sprintf("acl%d", len(h.names)+1)
			}
		}
		if tr, ok := dec.(*TopicRecord); ok {
			if _, named := h.names[tr.TopicID]; !named { // given IDs keep their script name
				h.names[tr.TopicID] = tr.Name
			}
		}
		fmt.Fprintf(out, "%s\n", h.format(dec))
		if err := h.st.Apply(h.next, dec); err != nil {
			fmt.Fprintf(out, "  refused: %s\n", h.scrub(err.Error()))
			if err := h.st.AdvanceTo(h.next); err != nil {
				t.Fatal(err)
			}
		}
		h.next++
	}
}

// show prints the whole image.
func (h *harness) show() string {
	var b strings.Builder
	s := h.st
	if id := s.ClusterID(); id != "" {
		fmt.Fprintf(&b, "cluster-id %s\n", id)
	}
	if lvl := s.Feature(FeatureReplication); lvl != 0 {
		fmt.Fprintf(&b, "feature %s=%d\n", FeatureReplication, lvl)
	}
	for _, br := range s.Brokers() {
		fmt.Fprintf(&b, "broker %d epoch=%d rack=%q fenced=%t", br.ID, br.Epoch, br.Rack, br.Fenced)
		if br.InControlledShutdown {
			b.WriteString(" shutting-down")
		}
		b.WriteString("\n")
	}
	for _, t := range s.Topics() {
		fmt.Fprintf(&b, "topic %s partitions=%d\n", t.Name, t.NumPartitions)
		for _, p := range s.Partitions(t.ID) {
			fmt.Fprintf(&b, "  %s replicas=%s isr=%s leader=%d leader-epoch=%d partition-epoch=%d",
				h.tp(p.TopicID, p.Partition), ints(p.Replicas), ints(p.ISR), p.Leader, p.LeaderEpoch, p.PartitionEpoch)
			if len(p.ELR) > 0 {
				fmt.Fprintf(&b, " elr=%s", ints(p.ELR))
			}
			if len(p.LastKnownELR) > 0 {
				fmt.Fprintf(&b, " last-known-elr=%s", ints(p.LastKnownELR))
			}
			if p.LeaderRecoveryState != LeaderRecovered {
				fmt.Fprintf(&b, " %s", recoveryName(p.LeaderRecoveryState))
			}
			if p.Reassigning() {
				fmt.Fprintf(&b, " adding=%s removing=%s", ints(p.AddingReplicas), ints(p.RemovingReplicas))
			}
			b.WriteString("\n")
		}
		cfg := s.TopicConfig(t.Name)
		for _, k := range sortedKeys(cfg) {
			fmt.Fprintf(&b, "  config %s=%s\n", k, cfg[k])
		}
	}
	for _, typ := range []string{"", "1", "2", "3"} {
		cfg := s.Config(ResourceBroker, typ)
		for _, k := range sortedKeys(cfg) {
			fmt.Fprintf(&b, "broker-config %q %s=%s\n", typ, k, cfg[k])
		}
	}
	for _, tp := range s.RemotePartitions() {
		for _, g := range s.RemoteSegments(tp.TopicID, tp.Partition) {
			fmt.Fprintf(&b, "remote %s %s %s [%d,%d] size=%d", h.tp(g.TopicID, g.Partition), h.name(g.SegmentID), g.State, g.BaseOffset, g.EndOffset, g.SizeBytes)
			if _, ok := s.TopicByID(g.TopicID); !ok {
				b.WriteString(" (topic deleted)")
			}
			b.WriteString("\n")
		}
	}
	for _, e := range s.ACLs() {
		fmt.Fprintf(&b, "acl %s %s\n", h.name(e.ID), e.ACL)
	}
	for _, c := range s.ScramCredentials() {
		fmt.Fprintf(&b, "scram %s %s iterations=%d\n", c.Name, c.Mechanism, c.Iterations)
	}
	for _, q := range s.ClientQuotas() {
		fmt.Fprintf(&b, "quota %s %s\n", q.Entity, quotaValues(q.Values))
	}
	// What the image knows of removed topics with remote data left.
	var removed []uuid.UUID
	for _, tp := range s.RemotePartitions() {
		if _, exists, _ := s.TopicNameByID(tp.TopicID); !exists && !slices.Contains(removed, tp.TopicID) {
			removed = append(removed, tp.TopicID)
		}
	}
	for _, id := range removed {
		if name, _, known := s.TopicNameByID(id); known {
			fmt.Fprintf(&b, "removed-topic %s name=%s\n", h.name(id), name)
		} else {
			fmt.Fprintf(&b, "removed-topic %s name unknown\n", h.name(id))
		}
	}
	if b.Len() == 0 {
		return "empty\n"
	}
	return b.String()
}

func argInt(t testing.TB, td *datadriven.TestData, key string, def int64) int64 {
	t.Helper()
	a, ok := td.Arg(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
	if err != nil {
		td.Fatalf(t, "%s: %v", key, err)
	}
	return n
}

func argStr(t testing.TB, td *datadriven.TestData, key, def string) string {
	t.Helper()
	a, ok := td.Arg(key)
	if !ok {
		return def
	}
	return a.SingleVal(t)
}

func argInts(t testing.TB, td *datadriven.TestData, key string) []int32 {
	t.Helper()
	a, ok := td.Arg(key)
	if !ok {
		return nil
	}
	out := []int32{}
	for _, v := range a.Vals {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			td.Fatalf(t, "%s: %v", key, err)
		}
		out = append(out, int32(n))
	}
	return out
}

func (h *harness) topicID(t testing.TB, td *datadriven.TestData) uuid.UUID {
	t.Helper()
	name := argStr(t, td, "topic", "")
	if ti, ok := h.st.TopicByName(name); ok {
		return ti.ID
	}
	for id, n := range h.names { // deleted topics keep their name here
		if n == name {
			return id
		}
	}
	td.Fatalf(t, "unknown topic %q", name)
	return uuid.Nil
}

func (h *harness) errLine(err error) string {
	if err == nil {
		return "ok"
	}
	detail := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		detail = strings.ReplaceAll(detail, ke.Error()+": ", "")
	}
	return "error " + ErrorName(err) + ": " + h.scrub(detail)
}

// scrub replaces the IDs in s by their script names.
func (h *harness) scrub(s string) string {
	for id, name := range h.names {
		s = strings.ReplaceAll(s, id.String(), name)
	}
	return s
}

// run executes one datadriven command.
func (h *harness) run(t testing.TB, td *datadriven.TestData) string {
	var out strings.Builder
	switch td.Cmd {
	case "register-broker":
		id := int32(argInt(t, td, "id", 0))
		if td.HasArg("new-incarnation") || h.incarn[id] == 0 {
			h.incarn[id]++
		}
		recs, res, err := h.st.PlanRegisterBroker(RegisterBrokerRequest{
			BrokerID: id, IncarnationID: incarnationID(id, h.incarn[id]),
			Listeners:            []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: int32(9092 + id), SecurityProtocol: "PLAINTEXT"}},
			Rack:                 argStr(t, td, "rack", ""),
			ClusterID:            argStr(t, td, "cluster-id", ""),
			ExistingSessionAlive: td.HasArg("alive"),
			PreviousBrokerEpoch:  h.previousEpoch(t, td, id),
		})
		h.apply(t, &out, recs)
		switch {
		case err != nil:
			fmt.Fprintln(&out, h.errLine(err))
		case res.ClusterID != "":
			fmt.Fprintf(&out, "ok epoch=%d cluster-id=%s\n", res.BrokerEpoch, res.ClusterID)
		default:
			fmt.Fprintf(&out, "ok epoch=%d\n", res.BrokerEpoch)
		}
	case "cluster-id":
		recs, err := h.st.PlanClusterID(argStr(t, td, "id", ""))
		h.apply(t, &out, recs)
		fmt.Fprintln(&out, h.errLine(err))
	case "heartbeat", "unfence":
		var ids []int32
		if td.Cmd == "unfence" {
			ids = argInts(t, td, "id")
		} else {
			ids = []int32{int32(argInt(t, td, "id", 0))}
		}
		for _, id := range ids {
			b, _ := h.st.Broker(id)
			recs, res, err := h.st.PlanBrokerHeartbeat(BrokerHeartbeatRequest{
				BrokerID:              id,
				BrokerEpoch:           argInt(t, td, "epoch", b.Epoch),
				CurrentMetadataOffset: argInt(t, td, "offset", h.st.Offset()),
				WantFence:             td.HasArg("want-fence"),
				WantShutDown:          td.HasArg("want-shutdown"),
			})
			h.apply(t, &out, recs)
			if err != nil {
				fmt.Fprintln(&out, h.errLine(err))
			} else {
				fmt.Fprintf(&out, "ok caught-up=%t fenced=%t shutdown=%t\n", res.IsCaughtUp, res.IsFenced, res.ShouldShutDown)
			}
		}
	case "fence-broker":
		var unclean func(string) bool
		if td.HasArg("unclean") {
			unclean = func(string) bool { return true }
		}
		recs := h.st.PlanFenceBroker(int32(argInt(t, td, "id", 0)), unclean)
		h.apply(t, &out, recs)
		fmt.Fprintln(&out, "ok")
	case "unregister-broker":
		recs, err := h.st.PlanUnregisterBroker(int32(argInt(t, td, "id", 0)))
		h.apply(t, &out, recs)
		fmt.Fprintln(&out, h.errLine(err))
	case "create-topic":
		ct := CreateTopic{
			Name:              argStr(t, td, "name", ""),
			NumPartitions:     int32(argInt(t, td, "partitions", -1)),
			ReplicationFactor: int16(argInt(t, td, "rf", -1)),
		}
		if td.HasArg("id") { // a given topic ID, named in the script
			idName := argStr(t, td, "id", "")
			ct.TopicID = scriptTopicID(idName)
			h.names[ct.TopicID] = idName
		}
		for _, line := range strings.Split(td.Input, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "":
			case strings.HasPrefix(line, "config "):
				k, v, _ := strings.Cut(strings.TrimPrefix(line, "config "), "=")
				if ct.Configs == nil {
					ct.Configs = map[string]string{}
				}
				ct.Configs[k] = v
			case strings.HasPrefix(line, "assign "):
				var reps []int32
				for _, f := range strings.Fields(strings.TrimPrefix(line, "assign ")) {
					n, _ := strconv.Atoi(f)
					reps = append(reps, int32(n))
				}
				ct.Assignments = append(ct.Assignments, reps)
			default:
				td.Fatalf(t, "bad input line %q", line)
			}
		}
		if td.HasArg("legacy") {
			// As versions before replication created topics: any
			// replication factor, every replica in the ISR.
			h.apply(t, &out, h.legacyTopic(ct))
			break
		}
		recs, res := h.st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{ct}, ValidateOnly: td.HasArg("validate-only")}, h.rng)
		h.apply(t, &out, recs)
		for _, r := range res {
			if r.Err != nil {
				fmt.Fprintln(&out, h.errLine(r.Err))
			} else {
				fmt.Fprintf(&out, "ok %s partitions=%d rf=%d\n", r.Name, r.NumPartitions, r.ReplicationFactor)
			}
		}
	case "replication-feature":
		h.apply(t, &out, h.st.PlanReplicationFeature())
		fmt.Fprintln(&out, "ok")
	case "defaults":
		h.st.SetDefaults(Defaults{
			MinInsyncReplicas:     int32(argInt(t, td, "min-isr", 0)),
			UncleanLeaderElection: td.HasArg("unclean"),
		})
		fmt.Fprintln(&out, "ok")
	case "create-partitions":
		recs, res := h.st.PlanCreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{
			Name: argStr(t, td, "topic", ""), Count: int32(argInt(t, td, "count", 0)),
		}}}, h.rng)
		h.apply(t, &out, recs)
		fmt.Fprintln(&out, h.errLine(res[0].Err))
	case "delete-topic":
		var names []string
		if a, ok := td.Arg("name"); ok {
			names = a.Vals
		}
		recs, res := h.st.PlanDeleteTopics(names, nil)
		h.apply(t, &out, recs)
		for _, r := range res {
			fmt.Fprintf(&out, "%s: %s\n", r.Name, h.errLine(r.Err))
		}
	case "alter-configs":
		res := AlterConfigResource{Type: ResourceTopic, Name: argStr(t, td, "topic", "")}
		if a, ok := td.Arg("broker"); ok {
			res = AlterConfigResource{Type: ResourceBroker, Name: strings.Trim(a.SingleVal(t), `"`)}
		}
		if a, ok := td.Arg("group"); ok {
			res = AlterConfigResource{Type: ResourceGroup, Name: strings.Trim(a.SingleVal(t), `"`)}
		}
		var gb *GroupConfigBounds
		if td.HasArg("session-bounds") || td.HasArg("heartbeat-bounds") {
			b := DefaultGroupConfigBounds
			if a, ok := td.Arg("session-bounds"); ok {
				lo, _ := strconv.Atoi(a.Vals[0])
				hi, _ := strconv.Atoi(a.Vals[1])
				b.MinSessionTimeoutMs, b.MaxSessionTimeoutMs = int32(lo), int32(hi)
			}
			if a, ok := td.Arg("heartbeat-bounds"); ok {
				lo, _ := strconv.Atoi(a.Vals[0])
				hi, _ := strconv.Atoi(a.Vals[1])
				b.MinHeartbeatIntervalMs, b.MaxHeartbeatIntervalMs = int32(lo), int32(hi)
			}
			gb = &b
		}
		ops := map[string]ConfigOp{"set": OpSet, "delete": OpDelete, "append": OpAppend, "subtract": OpSubtract}
		for _, line := range strings.Split(td.Input, "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			verb, rest, _ := strings.Cut(line, " ")
			op, ok := ops[verb]
			if !ok {
				td.Fatalf(t, "bad op %q", verb)
			}
			k, v, hasV := strings.Cut(rest, "=")
			e := AlterConfigEntry{Name: k, Op: op}
			if hasV {
				e.Value = &v
			}
			res.Configs = append(res.Configs, e)
		}
		recs, results := h.st.PlanAlterConfigs(AlterConfigsRequest{
			Resources: []AlterConfigResource{res}, Incremental: !td.HasArg("replace"), ValidateOnly: td.HasArg("validate-only"),
			GroupBounds: gb,
		})
		h.apply(t, &out, recs)
		fmt.Fprintln(&out, h.errLine(results[0].Err))
	case "alter-partition":
		id := h.topicID(t, td)
		pn := int32(argInt(t, td, "p", 0))
		p, _ := h.st.Partition(id, pn)
		broker := int32(argInt(t, td, "broker", int64(p.Leader)))
		b, _ := h.st.Broker(broker)
		req := AlterPartitionRequest{
			BrokerID: broker, BrokerEpoch: argInt(t, td, "broker-epoch", b.Epoch),
			TopicID: id, Partition: pn,
			LeaderEpoch:    int32(argInt(t, td, "leader-epoch", int64(p.LeaderEpoch))),
			PartitionEpoch: int32(argInt(t, td, "partition-epoch", int64(p.PartitionEpoch))),
			NewISR:         argInts(t, td, "isr"),
		}
		if td.HasArg("recovering") {
			req.LeaderRecoveryState = LeaderRecovering
		}
		if a, ok := td.Arg("isr-epochs"); ok {
			// v3: member@epoch, or a bare member for its registered epoch.
			req.NewISR = nil
			req.NewISRWithEpochs = []ISRMember{}
			for _, v := range a.Vals {
				m, e, hasE := strings.Cut(v, "@")
				mn, _ := strconv.Atoi(m)
				epoch := h.st.BrokerEpoch(int32(mn))
				if hasE {
					epoch, _ = strconv.ParseInt(e, 10, 64)
				}
				req.NewISRWithEpochs = append(req.NewISRWithEpochs, ISRMember{BrokerID: int32(mn), BrokerEpoch: epoch})
			}
		}
		recs, res := h.st.PlanAlterPartition(req)
		h.apply(t, &out, recs)
		fmt.Fprintf(&out, "%s leader=%d leader-epoch=%d partition-epoch=%d isr=%s", h.errLine(res.Err), res.Leader, res.LeaderEpoch, res.PartitionEpoch, ints(res.ISR))
		if res.LeaderRecoveryState != LeaderRecovered {
			fmt.Fprintf(&out, " %s", recoveryName(res.LeaderRecoveryState))
		}
		fmt.Fprintln(&out)
	case "reassign":
		// reassign topic=t [p=0] replicas=(2,3,4) | cancel; more
		// partitions as input lines "topic p r1 r2 ..." or "topic p cancel".
		var reqs []ReassignmentRequest
		if td.HasArg("topic") {
			req := ReassignmentRequest{Topic: argStr(t, td, "topic", ""), Partition: int32(argInt(t, td, "p", 0)),
				KeepReplicationFactor: td.HasArg("keep-rf")}
			if !td.HasArg("cancel") {
				req.Replicas = argInts(t, td, "replicas")
				if req.Replicas == nil {
					req.Replicas = []int32{}
				}
			}
			reqs = append(reqs, req)
		}
		for _, line := range strings.Split(td.Input, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			pn, _ := strconv.Atoi(f[1])
			req := ReassignmentRequest{Topic: f[0], Partition: int32(pn)}
			if len(f) < 3 || f[2] != "cancel" {
				req.Replicas = []int32{}
				for _, v := range f[2:] {
					n, _ := strconv.Atoi(v)
					req.Replicas = append(req.Replicas, int32(n))
				}
			}
			reqs = append(reqs, req)
		}
		recs, res := h.st.PlanReassignments(reqs)
		h.apply(t, &out, recs)
		for _, r := range res {
			fmt.Fprintf(&out, "%s-%d: %s\n", r.Topic, r.Partition, h.errLine(r.Err))
		}
	case "list-reassignments":
		var req ListReassignmentsRequest
		for _, line := range strings.Split(td.Input, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			lt := ListReassignmentsTopic{Name: f[0]}
			for _, v := range f[1:] {
				n, _ := strconv.Atoi(v)
				lt.Partitions = append(lt.Partitions, int32(n))
			}
			req.Topics = append(req.Topics, lt)
		}
		for _, o := range h.st.ListReassignments(req) {
			fmt.Fprintf(&out, "%s-%d replicas=%s adding=%s removing=%s\n", o.Topic, o.Partition, ints(o.Replicas), ints(o.AddingReplicas), ints(o.RemovingReplicas))
		}
		fmt.Fprintln(&out, "ok")
	case "elect-leaders":
		// elect-leaders type=preferred|unclean, one "topic p..." line per
		// topic (none: every partition, Kafka's null topics; a line
		// "empty": an empty list).
		req := ElectLeadersRequest{Type: ElectPreferred}
		if argStr(t, td, "type", "preferred") == "unclean" {
			req.Type = ElectUnclean
		}
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if req.Topics == nil {
				req.Topics = []ElectLeadersTopic{}
			}
			if f[0] == "empty" {
				continue
			}
			et := ElectLeadersTopic{Name: f[0]}
			for _, v := range f[1:] {
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					td.Fatalf(t, "partition %q: %v", v, err)
				}
				et.Partitions = append(et.Partitions, int32(n))
			}
			req.Topics = append(req.Topics, et)
		}
		recs, res := h.st.PlanElectLeaders(req)
		h.apply(t, &out, recs)
		for _, r := range res {
			if len(r.Partitions) == 0 {
				fmt.Fprintf(&out, "%s: no partitions\n", r.Topic)
			}
			for _, p := range r.Partitions {
				fmt.Fprintf(&out, "%s-%d %s\n", r.Topic, p.Partition, h.errLine(p.Err))
			}
		}
		if len(res) == 0 {
			fmt.Fprintln(&out, "no topics")
		}
	case "rebalance":
		recs, more := h.st.PlanPreferredRebalance(int(argInt(t, td, "percent", 10)))
		h.apply(t, &out, recs)
		fmt.Fprintf(&out, "ok elections=%d more=%t\n", len(recs), more)
	case "remote-segment":
		name := argStr(t, td, "seg", "")
		sid := segID(name)
		h.names[sid] = name
		states := map[string]RemoteSegmentState{"COPY_STARTED": CopyStarted, "COPY_FINISHED": CopyFinished, "DELETE_STARTED": DeleteStarted, "DELETE_FINISHED": DeleteFinished}
		stName := argStr(t, td, "state", "")
		st, ok := states[stName]
		if !ok {
			td.Fatalf(t, "bad state %q", stName)
		}
		rec := RemoteSegmentRecord{
			SegmentID: sid, TopicID: h.topicID(t, td), Partition: int32(argInt(t, td, "p", 0)),
			BaseOffset: argInt(t, td, "base", 0), EndOffset: argInt(t, td, "end", 0),
			MaxTimestamp: argInt(t, td, "max-ts", 0), SizeBytes: argInt(t, td, "size", 0),
			State: st, BrokerID: int32(argInt(t, td, "broker", 1)), EventTimestamp: argInt(t, td, "ts", 0),
			WriterLeaderEpoch: int32(argInt(t, td, "leader-epoch", int64(UnknownLeaderEpoch))),
		}
		if a, ok := td.Arg("epochs"); ok {
			for _, v := range a.Vals {
				e, s, _ := strings.Cut(v, "@")
				en, _ := strconv.Atoi(e)
				sn, _ := strconv.ParseInt(s, 10, 64)
				rec.LeaderEpochs = append(rec.LeaderEpochs, EpochStart{Epoch: int32(en), StartOffset: sn})
			}
		}
		recs, err := h.st.PlanRemoteSegment(rec)
		h.apply(t, &out, recs)
		fmt.Fprintln(&out, h.errLine(err))
	case "apply":
		// apply raw records, bypassing the planners, to exercise Apply's
		// own consistency checks.
		var r Record
		switch argStr(t, td, "kind", "") {
		case "partition-change":
			pc := &PartitionChangeRecord{TopicID: h.topicID(t, td), Partition: int32(argInt(t, td, "p", 0))}
			if td.HasArg("leader") {
				pc.Leader = ptr(int32(argInt(t, td, "leader", 0)))
			}
			if td.HasArg("isr") {
				pc.ISR = argInts(t, td, "isr")
			}
			r = pc
		case "remote-segment":
			h.names[segID(argStr(t, td, "seg", ""))] = argStr(t, td, "seg", "")
			r = &RemoteSegmentRecord{SegmentID: segID(argStr(t, td, "seg", "")), TopicID: h.topicID(t, td), State: RemoteSegmentState(argInt(t, td, "state", 0)), EndOffset: 1, WriterLeaderEpoch: UnknownLeaderEpoch}
		case "topic":
			r = &TopicRecord{Name: argStr(t, td, "name", ""), TopicID: scriptTopicID(argStr(t, td, "topic-id", ""))}
		case "cluster-id":
			r = &ClusterIDRecord{ClusterID: argStr(t, td, "id", "")}
		case "unregister-broker":
			r = &UnregisterBrokerRecord{BrokerID: int32(argInt(t, td, "id", 0)), BrokerEpoch: argInt(t, td, "epoch", 0)}
		default:
			td.Fatalf(t, "unknown kind")
		}
		h.apply(t, &out, []Record{r})
	case "create-acls":
		// one binding a line, as authz.ACL.String writes it
		var acls []authz.ACL
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			a, err := authz.ParseACL(line)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			acls = append(acls, a)
		}
		recs, res := h.st.PlanCreateACLs(acls, h.rng)
		h.apply(t, &out, recs)
		for i, r := range res {
			fmt.Fprintf(&out, "%d: %s\n", i, h.errLine(r.Err))
		}
	case "delete-acls", "describe-acls":
		// one filter a line, as a binding with "null" for a name,
		// principal or host matching any
		var filters []authz.Filter
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			a, err := authz.ParseACL(line)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			orNil := func(s string) *string {
				if s == "null" {
					return nil
				}
				return &s
			}
			filters = append(filters, authz.Filter{ResourceType: a.ResourceType, ResourceName: orNil(a.ResourceName),
				PatternType: a.PatternType, Principal: orNil(a.Principal), Host: orNil(a.Host), Operation: a.Operation, Permission: a.Permission})
		}
		if td.Cmd == "describe-acls" {
			for i, f := range filters {
				for _, e := range h.st.DescribeACLs(f) {
					fmt.Fprintf(&out, "%d: %s %s\n", i, h.name(e.ID), e.ACL)
				}
			}
			break
		}
		recs, res := h.st.PlanDeleteACLs(filters)
		h.apply(t, &out, recs)
		for i, r := range res {
			fmt.Fprintf(&out, "%d: %s\n", i, h.errLine(r.Err))
			for _, e := range r.Deleted {
				fmt.Fprintf(&out, "  deleted %s %s\n", h.name(e.ID), e.ACL)
			}
		}
	case "alter-scram":
		// one alteration a line:
		//   delete <user> <mechanism>
		//   upsert <user> <mechanism> iterations=N salt=S password=P | salted-len=N
		var dels []ScramDeletion
		var ups []ScramUpsertion
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				td.Fatalf(t, "bad line %q", line)
			}
			name := f[1]
			if name == `""` {
				name = ""
			}
			mech := ScramMechanismByName(f[2])
			if f[2] == "SCRAM-SHA-1" {
				mech = 3
			}
			switch f[0] {
			case "delete":
				dels = append(dels, ScramDeletion{Name: name, Mechanism: mech})
			case "upsert":
				u := ScramUpsertion{Name: name, Mechanism: mech}
				kv := map[string]string{}
				for _, a := range f[3:] {
					k, v, _ := strings.Cut(a, "=")
					kv[k] = v
				}
				it, _ := strconv.Atoi(kv["iterations"])
				u.Iterations = int32(it)
				u.Salt = []byte(kv["salt"])
				if n, ok := kv["salted-len"]; ok {
					l, _ := strconv.Atoi(n)
					u.SaltedPassword = make([]byte, l)
				} else if mech.keySize() > 0 && it > 0 {
					salted, err := sasl.ScramSaltedPassword(mech.String(), kv["password"], u.Salt, it)
					if err != nil {
						td.Fatalf(t, "%v", err)
					}
					u.SaltedPassword = salted
				}
				ups = append(ups, u)
			default:
				td.Fatalf(t, "bad line %q", line)
			}
		}
		recs, res := h.st.PlanAlterUserScramCredentials(dels, ups)
		h.apply(t, &out, recs)
		for _, r := range res {
			fmt.Fprintf(&out, "%s: %s\n", r.User, h.errLine(r.Err))
		}
	case "describe-scram":
		// the users, space separated; none describes all
		for _, d := range h.st.DescribeUserScramCredentials(strings.Fields(td.Input)) {
			if d.Err != nil {
				fmt.Fprintf(&out, "%s: %s\n", d.User, h.errLine(d.Err))
				continue
			}
			fmt.Fprintf(&out, "%s:", d.User)
			for _, c := range d.Creds {
				fmt.Fprintf(&out, " %s/%d", c.Mechanism, c.Iterations)
			}
			out.WriteString("\n")
		}
	case "alter-quotas":
		// one entry a line: entity ops...; entity type=name,... (name
		// <default> for the default, "-" for an empty entity), ops
		// key=value or key=- (remove)
		var alts []QuotaAlteration
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			f := strings.Fields(line)
			a := QuotaAlteration{Entity: parseQuotaParts(t, td, f[0])}
			for _, op := range f[1:] {
				k, v, _ := strings.Cut(op, "=")
				if v == "-" {
					a.Ops = append(a.Ops, QuotaOp{Key: k, Remove: true})
					continue
				}
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					td.Fatalf(t, "%v", err)
				}
				a.Ops = append(a.Ops, QuotaOp{Key: k, Value: x})
			}
			alts = append(alts, a)
		}
		recs, res := h.st.PlanAlterClientQuotas(alts, td.HasArg("validate-only"))
		h.apply(t, &out, recs)
		for i, err := range res {
			fmt.Fprintf(&out, "%d: %s\n", i, h.errLine(err))
		}
	case "describe-quotas":
		// one filter a line: components type:exact:name, type:default,
		// type:any or type:<match type number>[:name]; "-" for none
		for i, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			var comps []QuotaFilterComponent
			for _, c := range strings.Fields(line) {
				if c == "-" {
					continue
				}
				parts := strings.SplitN(c, ":", 3)
				fc := QuotaFilterComponent{EntityType: parts[0]}
				switch parts[1] {
				case "exact":
					fc.MatchType = QuotaMatchExact
				case "default":
					fc.MatchType = QuotaMatchDefault
				case "any":
					fc.MatchType = QuotaMatchAny
				default:
					n, _ := strconv.Atoi(parts[1])
					fc.MatchType = int8(n)
				}
				if len(parts) == 3 {
					fc.Match = &parts[2]
				}
				comps = append(comps, fc)
			}
			found, err := h.st.DescribeClientQuotas(comps, td.HasArg("strict"))
			if err != nil {
				fmt.Fprintf(&out, "%d: %s\n", i, h.errLine(err))
				continue
			}
			for _, q := range found {
				fmt.Fprintf(&out, "%d: %s %s\n", i, q.Entity, quotaValues(q.Values))
			}
		}
	case "show":
		return h.show()
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	h.checkSnapshot(t)
	return out.String()
}

// previousEpoch is a registration's PreviousBrokerEpoch: previous-epoch=N
// as given, unclean-restart for none (0), else (a clean restart, or a
// first registration) the broker's current epoch.
func (h *harness) previousEpoch(t testing.TB, td *datadriven.TestData, id int32) int64 {
	if td.HasArg("unclean-restart") {
		return 0
	}
	return argInt(t, td, "previous-epoch", h.st.BrokerEpoch(id))
}

// legacyTopic returns the records a version before replication planned
// for ct (no validation): its assignments or the rack-aware
// placement of ct.ReplicationFactor replicas, the leader the first replica,
// and every replica in the ISR although none but the leader held data. It
// draws from h.rng in PlanCreateTopics' order (placement, then the ID).
func (h *harness) legacyTopic(ct CreateTopic) []Record {
	assign := ct.Assignments
	if assign == nil {
		assign = placeReplicas(h.st.usableBrokers(), 0, int(ct.NumPartitions), int(ct.ReplicationFactor), h.rng)
	}
	id := h.st.newTopicID(h.rng, func(uuid.UUID) bool { return false })
	recs := []Record{&TopicRecord{Name: ct.Name, TopicID: id}}
	for p, replicas := range assign {
		recs = append(recs, &PartitionRecord{TopicID: id, Partition: int32(p), Replicas: replicas, ISR: slices.Clone(replicas), Leader: replicas[0]})
	}
	for _, name := range sortedKeys(ct.Configs) {
		recs = append(recs, &ConfigRecord{ResourceType: ResourceTopic, ResourceName: ct.Name, Name: name, Value: ptr(ct.Configs[name])})
	}
	return recs
}

// checkSnapshot asserts after every command that the image survives a
// snapshot round trip byte for byte and that a clone marshals identically.
func (h *harness) checkSnapshot(t testing.TB) {
	t.Helper()
	b, err := h.st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("unmarshal of own snapshot: %v", err)
	}
	b2, _ := back.Marshal()
	b3, _ := h.st.Clone().Marshal()
	if !slices.Equal(b, b2) || !slices.Equal(b, b3) {
		t.Fatalf("snapshot round trip or clone differs")
	}
}

// parseQuotaParts reads an entity as the quota scripts write it:
// type=name,... with <default> for a null name, "-" for none.
func parseQuotaParts(t testing.TB, td *datadriven.TestData, s string) []QuotaEntityPart {
	if s == "-" {
		return nil
	}
	var parts []QuotaEntityPart
	for _, p := range strings.Split(s, ",") {
		typ, name, ok := strings.Cut(p, "=")
		if !ok {
			td.Fatalf(t, "entity part %q", p)
		}
		part := QuotaEntityPart{Type: typ}
		if name != "<default>" {
			part.Name = &name
		}
		parts = append(parts, part)
	}
	return parts
}

func quotaValues(vals map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(vals) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, vals[k]))
	}
	return strings.Join(parts, " ")
}
