package group

// The admin APIs of the coordinator: DescribeGroups, ListGroups and
// DeleteGroups. They read or drop whole groups under Coordinator.mu and
// never park; membership requests are in join.go, sync.go, heartbeat.go.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups handles a DescribeGroups request (all versions). Member
// metadata and assignments are filled only for a Stable group, as Kafka
// does. An unknown group is described as Dead (v6+: GROUP_ID_NOT_FOUND).
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = groupOperations
		}
		if code := c.checkLocked(id, true); code != 0 {
			d.ErrorCode = code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		g := c.groups[id]
		if g == nil || g.state == Dead {
			d.State = Dead.String()
			if req.Version >= 6 {
				d.ErrorCode = kerr.GroupIDNotFound.Code
				d.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("group %s not found", id))
			}
			resp.Groups = append(resp.Groups, d)
			continue
		}
		d.State = g.state.String()
		d.ProtocolType = g.protocolType
		if g.state == Stable {
			d.Protocol = g.protocol
		}
		for _, m := range g.sortedMembers() {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
			dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
			if g.state == Stable {
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				if m.assignment != nil {
					dm.MemberAssignment = m.assignment
				}
			}
			d.Members = append(d.Members, dm)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// ListGroups handles a ListGroups request (all versions): the groups of
// the loaded partitions, filtered by state (v4+, case-insensitive) and
// type (v5+: every group here is "classic"). While any partition loads,
// the answer carries COORDINATOR_LOAD_IN_PROGRESS with what is loaded.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, st := range c.parts {
		if st == Loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
	}
	match := func(v string, filter []string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g := c.groups[id]
		if g.state == Dead || c.parts[g.partition] != Loaded {
			continue
		}
		if (req.Version >= 4 && !match(g.state.String(), req.StatesFilter)) ||
			(req.Version >= 5 && !match(classicGroupType, req.TypesFilter)) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.protocolType, g.state.String(), classicGroupType
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DeleteGroups handles a DeleteGroups request (all versions): an Empty
// group is marked Dead, its metadata and offsets tombstoned
// ([Persister.DeleteGroup]) and it is forgotten; a group with members gets
// NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. If the tombstones
// cannot be written the group goes back to Empty and the error is
// answered.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	var doomed []*group
	results := map[string]int16{}
	c.mu.Lock()
	for _, id := range req.Groups {
		if _, dup := results[id]; dup {
			continue
		}
		if code := c.checkLocked(id, true); code != 0 {
			results[id] = code
			continue
		}
		g := c.groups[id]
		switch {
		case g == nil || g.state == Dead:
			results[id] = kerr.GroupIDNotFound.Code
		case g.state == Empty:
			c.transitionLocked(g, Dead)
			results[id] = 0
			doomed = append(doomed, g)
		default:
			results[id] = kerr.NonEmptyGroup.Code
		}
	}
	c.mu.Unlock()
	for _, g := range doomed {
		g.storeMu.Lock()
		var err error
		if c.persister != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			err = c.persister.DeleteGroup(sctx, g.partition, g.id)
			cancel()
		}
		c.mu.Lock()
		if c.groups[g.id] == g {
			if err != nil {
				results[g.id] = storeErrorCode(err)
				c.transitionLocked(g, Empty)
			} else {
				g.deleted = true
				c.stopTimersLocked(g)
				delete(c.groups, g.id)
			}
		}
		c.mu.Unlock()
		g.storeMu.Unlock()
	}
	for _, id := range req.Groups {
		code, ok := results[id]
		if !ok {
			continue
		}
		delete(results, id)
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group, r.ErrorCode = id, code
		resp.Groups = append(resp.Groups, r)
	}
	return resp
}
