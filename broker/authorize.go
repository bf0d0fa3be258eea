package broker

// The authorizer in the request path: the node keeps an authz.Authorizer
// built from the metadata image's ACLs (nil without authorizer.class.name,
// when everything is allowed, as in Kafka without an authorizer), replaced
// under metaMu whenever a delta carries ACL records, before the handlers
// waiting on metaNotify wake (read-your-writes of CreateAcls/DeleteAcls).
// Handlers ask through the request (r.allowed), which knows the
// connection's principal and address.
//
// Inter-broker traffic is authorized like any other: a broker's own
// principal (User:ANONYMOUS on a PLAINTEXT listener) must be in
// super.users, or hold CLUSTER_ACTION on the cluster, as in a Kafka setup
// with an authorizer.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

// refreshAuthorizer rebuilds the authorizer when d replaced the image or
// carried ACL records. The caller holds metaMu (or owns n alone).
func (n *Node) refreshAuthorizer(d controller.Delta) {
	if n.cfg.Authorizer == nil {
		return
	}
	changed := d.Image != nil || n.authz.Load() == nil
	for _, r := range d.Records {
		switch r.(type) {
		case *metadata.AccessControlEntryRecord, *metadata.RemoveAccessControlEntryRecord:
			changed = true
		}
	}
	if !changed {
		return
	}
	entries := n.meta.ACLs()
	acls := make([]authz.ACL, len(entries))
	for i, e := range entries {
		acls[i] = e.ACL
	}
	n.authz.Store(authz.New(*n.cfg.Authorizer, acls))
}

// authorizer returns the current authorizer, nil when none is configured.
func (n *Node) authorizer() *authz.Authorizer { return n.authz.Load() }

// principal is Kafka's "User:name" of the request's connection.
func (r *request) principal() string {
	if r.conn == nil {
		return Anonymous.String()
	}
	return r.conn.Principal().String()
}

// host is the client's IP address as ACL hosts name it.
func (r *request) host() string {
	if r.conn == nil || r.conn.nc == nil {
		return ""
	}
	h, _, err := net.SplitHostPort(r.conn.nc.RemoteAddr().String())
	if err != nil {
		return r.conn.nc.RemoteAddr().String()
	}
	return h
}

// allowed reports whether the request's principal may do op on the
// resource; always true without an authorizer.
func (r *request) allowed(a *authz.Authorizer, op authz.Operation, rt authz.ResourceType, name string) bool {
	if a == nil {
		return true
	}
	return a.Authorize(r.principal(), r.host(), op, rt, name)
}

// allowedCluster is allowed on the cluster resource.
func (r *request) allowedCluster(a *authz.Authorizer, op authz.Operation) bool {
	return r.allowed(a, op, authz.ResCluster, authz.ClusterName)
}

// configRefusal is Kafka's check of one config resource: op
// (DESCRIBE_CONFIGS or ALTER_CONFIGS) on the topic, else
// TOPIC_AUTHORIZATION_FAILED; on the cluster for a broker or broker
// logger resource, else CLUSTER_AUTHORIZATION_FAILED; nil if allowed.
func (r *request) configRefusal(a *authz.Authorizer, typ kmsg.ConfigResourceType, name string, op authz.Operation) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !r.allowed(a, op, authz.ResTopic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !r.allowedCluster(a, op) {
			return kerr.ClusterAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !r.allowed(a, op, authz.ResGroup, name) {
			return kerr.GroupAuthorizationFailed
		}
	}
	return nil
}
