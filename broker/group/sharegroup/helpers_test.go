package sharegroup

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/google/uuid"
)

// topicID names a script topic deterministically.
func topicID(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte("topic/"+name)) }

type names map[uuid.UUID]string

func (n names) of(id uuid.UUID) string {
	if s, ok := n[id]; ok {
		return s
	}
	return id.String()
}

// ranges prints sorted partitions compactly: 0-2,5.
func ranges(ps []int32) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ps[i], ps[j])
		} else {
			fmt.Fprintf(&b, "%d", ps[i])
		}
		i = j + 1
	}
	return b.String()
}

// format prints an assignment as "a:0-2 b:1", topics by name; "-" if empty.
func (n names) format(a Assignment) string {
	var parts []string
	for t, ps := range a {
		if len(ps) > 0 {
			parts = append(parts, n.of(t)+":"+ranges(ps))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (n names) formatState(ts []StateTopic) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, t.Name+":"+ranges(t.Partitions))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// formatRecord prints one record as the scripts expect.
func (n names) formatRecord(r Record) string {
	switch r := r.(type) {
	case *MemberMetadataRecord:
		if r.Deleted {
			return "MemberMetadata " + r.MemberID + " deleted"
		}
		s := fmt.Sprintf("MemberMetadata %s names=%v client=%s/%s", r.MemberID, r.SubscribedTopicNames, r.ClientID, r.ClientHost)
		if r.RackID != "" {
			s += " rack=" + r.RackID
		}
		return s
	case *GroupMetadataRecord:
		if r.Deleted {
			return "GroupMetadata deleted"
		}
		return fmt.Sprintf("GroupMetadata epoch=%d", r.Epoch)
	case *TargetMetadataRecord:
		if r.Deleted {
			return "TargetMetadata deleted"
		}
		return fmt.Sprintf("TargetMetadata epoch=%d", r.AssignmentEpoch)
	case *TargetMemberRecord:
		if r.Deleted {
			return "TargetMember " + r.MemberID + " deleted"
		}
		return fmt.Sprintf("TargetMember %s %s", r.MemberID, n.format(r.Partitions))
	case *CurrentAssignmentRecord:
		if r.Deleted {
			return "CurrentAssignment " + r.MemberID + " deleted"
		}
		return fmt.Sprintf("CurrentAssignment %s epoch=%d prev=%d assigned=%s", r.MemberID, r.MemberEpoch, r.PreviousMemberEpoch, n.format(r.Assigned))
	case *StatePartitionMetadataRecord:
		if r.Deleted {
			return "StatePartitionMetadata deleted"
		}
		return "StatePartitionMetadata initialized=" + n.formatState(r.Initialized)
	}
	return fmt.Sprintf("%T", r)
}

// snapshot prints a group's durable state, to compare a live group with
// its replay.
func (n names) snapshot(g *Group) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch=%d hash=%d assignment-epoch=%d state=%s\n", g.Epoch, g.MetadataHash, g.AssignmentEpoch, n.formatState(g.Partitions()))
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		fmt.Fprintf(&b, "member %s epoch=%d prev=%d rack=%s client=%s/%s names=%v assigned=%s\n", m.ID, m.Epoch, m.PreviousEpoch, m.RackID, m.ClientID, m.ClientHost, m.SubscribedTopicNames, n.format(m.Assigned))
	}
	for _, id := range slices.Sorted(maps.Keys(g.Target)) {
		fmt.Fprintf(&b, "target %s %s\n", id, n.format(g.Target[id]))
	}
	fmt.Fprintf(&b, "subs=%v\n", g.subCount)
	return b.String()
}

func atoi(t testing.TB, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}

func argStr(td *datadriven.TestData, key, def string) string {
	for _, a := range td.CmdArgs {
		if a.Key == key {
			if len(a.Vals) == 0 {
				return ""
			}
			return strings.Join(a.Vals, ",")
		}
	}
	return def
}

func hasArg(td *datadriven.TestData, key string) bool {
	for _, a := range td.CmdArgs {
		if a.Key == key {
			return true
		}
	}
	return false
}

// parseTopics reads "name partitions=N [internal]" lines.
func parseTopics(t testing.TB, input string) (TopicImage, names) {
	img, nm := TopicImage{}, names{}
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		top := Topic{Name: f[0], ID: topicID(f[0])}
		for _, w := range f[1:] {
			if w == "internal" {
				top.Internal = true
				continue
			}
			k, v, _ := strings.Cut(w, "=")
			if k != "partitions" {
				t.Fatalf("topic %q: unknown %q", line, k)
			}
			top.Partitions = int32(atoi(t, v))
		}
		img[top.Name] = top
		nm[top.ID] = top.Name
	}
	return img, nm
}
