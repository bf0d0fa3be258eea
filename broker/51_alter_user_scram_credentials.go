package broker

// AlterUserScramCredentials (key 51), version 0 (KIP-554).
//
// Behaviour, as Kafka's KafkaApis and ScramControlManager: with an
// authorizer, a principal without ALTER on the cluster gets
// CLUSTER_AUTHORIZATION_FAILED for every user of the request. Otherwise the
// deletions and upsertions go to the controller
// (metadata.PlanAlterUserScramCredentials: DUPLICATE_RESOURCE for a user
// named twice, UNACCEPTABLE_CREDENTIAL for an empty name or iterations
// outside 4096..16384, UNSUPPORTED_SASL_MECHANISM for an unknown mechanism,
// RESOURCE_NOT_FOUND for deleting an absent credential), which derives the
// StoredKey and ServerKey from the client's salted password and stores only
// those. The answer leaves once this broker's image holds every change the
// controller accepted (read-your-writes: kafka-go describes right after
// altering, and this broker's SASL listeners authenticate with the new
// credential at once); past the timeout those users answer
// REQUEST_TIMED_OUT.
//
// Differences from Kafka: results follow the users' first appearance in the
// request (Kafka's follow a hash map's order).

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/sasl"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(51, 0, handleAlterUserScramCredentials) }

func handleAlterUserScramCredentials(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	var alt controller.AlterScramRequest
	for _, d := range req.Deletions {
		alt.Deletions = append(alt.Deletions, metadata.ScramDeletion{Name: d.Name, Mechanism: metadata.ScramMechanism(d.Mechanism)})
	}
	for _, u := range req.Upsertions {
		alt.Upsertions = append(alt.Upsertions, metadata.ScramUpsertion{Name: u.Name, Mechanism: metadata.ScramMechanism(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	if len(alt.Deletions)+len(alt.Upsertions) == 0 {
		return encodeResponse(r, resp), nil
	}
	fail := func(err error) (*frame, error) {
		seen := map[string]bool{}
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = user, errCode(err), kmsg.StringPtr(err.Error())
				resp.Results = append(resp.Results, res)
			}
		}
		for _, d := range alt.Deletions {
			add(d.Name)
		}
		for _, u := range alt.Upsertions {
			add(u.Name)
		}
		return encodeResponse(r, resp), nil
	}
	if !r.allowedCluster(n.authorizer(), authz.OpAlter) {
		return fail(kerr.ClusterAuthorizationFailed)
	}
	cctx, cancel := context.WithTimeout(ctx, aclWriteTimeout)
	defer cancel()
	results, err := n.svc.AlterUserScramCredentials(cctx, alt)
	if err != nil {
		return fail(err)
	}

	// What this broker's image must show before the answer leaves: each
	// accepted deletion gone, each accepted upsertion present as derived.
	done := map[string]bool{}
	for _, res := range results {
		done[res.User] = res.Err == nil
	}
	type want struct {
		name string
		mech metadata.ScramMechanism
		cred *sasl.ScramCredential // nil: absent
	}
	var wants []want
	for _, d := range alt.Deletions {
		if done[d.Name] {
			wants = append(wants, want{d.Name, d.Mechanism, nil})
		}
	}
	for _, u := range alt.Upsertions {
		if !done[u.Name] {
			continue
		}
		c, err := sasl.ScramCredentialFromSalted(u.Mechanism.String(), u.SaltedPassword, u.Salt, int(u.Iterations))
		if err != nil { // the controller accepted it, so it cannot fail
			continue
		}
		wants = append(wants, want{u.Name, u.Mechanism, &c})
	}
	seen := n.waitMetadata(cctx, func(st *metadata.State) bool {
		for _, w := range wants {
			have, ok := st.ScramCredential(w.name, w.mech)
			if w.cred == nil {
				if ok {
					return false
				}
				continue
			}
			if !ok || have.Iterations != w.cred.Iterations || !bytes.Equal(have.Salt, w.cred.Salt) || !bytes.Equal(have.StoredKey, w.cred.StoredKey) {
				return false
			}
		}
		return true
	})
	for _, res := range results {
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User = res.User
		switch {
		case res.Err != nil:
			rr.ErrorCode, rr.ErrorMessage = errCode(res.Err), kmsg.StringPtr(res.Err.Error())
		case !seen:
			rr.ErrorCode = kerr.RequestTimedOut.Code
			rr.ErrorMessage = kmsg.StringPtr("altered, but not yet applied on this broker")
		}
		resp.Results = append(resp.Results, rr)
	}
	return encodeResponse(r, resp), nil
}
