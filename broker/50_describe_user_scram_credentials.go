package broker

// DescribeUserScramCredentials (key 50), version 0 (KIP-554).
//
// Behaviour, as Kafka's KafkaApis and ScramImage.describe: a principal
// without DESCRIBE on the cluster gets CLUSTER_AUTHORIZATION_FAILED as the
// top-level error (authorize_request.go), when an authorizer is configured.
// Otherwise this broker's metadata image answers
// (metadata.State.DescribeUserScramCredentials): no users (null or empty)
// lists every user with a credential; a user named twice is
// DUPLICATE_RESOURCE; a user without credentials RESOURCE_NOT_FOUND; each
// credential is its mechanism and iterations, never the salt or keys.
// AlterUserScramCredentials answers only once this broker's image holds
// its changes, so a describe to the same broker reads the writes.
//
// Differences from Kafka: results are sorted by user (Kafka's follow a hash
// map's order).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(50, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	users := make([]string, len(req.Users))
	for i, u := range req.Users {
		users[i] = u.Name
	}
	var descs []metadata.ScramUserDescription
	n.view(func(st *metadata.State) { descs = st.DescribeUserScramCredentials(users) })
	for _, d := range descs {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = d.User
		if d.Err != nil {
			res.ErrorCode, res.ErrorMessage = errCode(d.Err), kmsg.StringPtr(d.Err.Error())
		}
		for _, c := range d.Creds {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = int8(c.Mechanism), int32(c.Iterations)
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		resp.Results = append(resp.Results, res)
	}
	return encodeResponse(r, resp), nil
}
