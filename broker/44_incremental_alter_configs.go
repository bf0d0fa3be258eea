package broker

// IncrementalAlterConfigs (key 44), versions 0 through kmsg's newest (1).
//
// Behaviour: per resource, each entry is SET (0), DELETE (1, back to the
// inherited value), APPEND (2) or SUBTRACT (3; list configs such as
// cleanup.policy only: INVALID_REQUEST otherwise), applied in order to the
// resource's current configs by the controller, which validates the result
// as a whole (INVALID_CONFIG with a message). ValidateOnly, resources, errors
// and the wait for the change to reach this broker's view are those of
// AlterConfigs (33_alter_configs.go).
//
// A config named twice in one resource is INVALID_REQUEST for that
// resource, as in Kafka. GROUP resources (type 32, a group id) take
// consumer.session.timeout.ms and consumer.heartbeat.interval.ms, checked
// against this broker's group.consumer.{min,max}.* bounds and applied by
// the coordinator from the group's members' next heartbeat (GROUP
// ALTER_CONFIGS authorizes them).
//
// Differences from Kafka: none known.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(44, 0, handleIncrementalAlterConfigs) }

// errResultCount is answered (as UNKNOWN_SERVER_ERROR) if the controller
// returns a result count that does not match the request's.
var errResultCount = errors.New("broker: controller answered a different number of results")

func handleIncrementalAlterConfigs(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.IncrementalAlterConfigsRequest)
	mreq := metadata.AlterConfigsRequest{ValidateOnly: req.ValidateOnly, Incremental: true}
	refused := make([]error, len(req.Resources))
	az := n.authorizer() // authorize.go: ALTER_CONFIGS, checked first
	for i, rr := range req.Resources {
		refused[i] = r.configRefusal(az, rr.ResourceType, rr.ResourceName, authz.OpAlterConfigs)
		res := metadata.AlterConfigResource{Type: metadata.ResourceType(rr.ResourceType), Name: rr.ResourceName}
		seen := map[string]bool{}
		for _, c := range rr.Configs {
			if seen[c.Name] && refused[i] == nil {
				refused[i] = fmt.Errorf("%w: duplicate config key %q", kerr.InvalidRequest, c.Name)
			}
			seen[c.Name] = true
			res.Configs = append(res.Configs, metadata.AlterConfigEntry{Name: c.Name, Value: c.Value, Op: metadata.ConfigOp(c.Op)})
		}
		mreq.Resources = append(mreq.Resources, res)
	}
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for _, res := range n.alterConfigs(ctx, mreq, refused) {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceType(res.Type), res.Name
		rr.ErrorCode, rr.ErrorMessage = res.code, res.msg
		resp.Resources = append(resp.Resources, rr)
	}
	return encodeResponse(r, resp), nil
}
