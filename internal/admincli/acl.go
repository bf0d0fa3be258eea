package admincli

import (
	"flag"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL tools of Kafka's kafka-acls.sh: create, list and delete
// bindings through CreateAcls, DescribeAcls and DeleteAcls (a broker
// without an authorizer answers SECURITY_DISABLED).
func aclActions() []*action {
	return []*action{
		{name: "create", summary: "add ALLOW (or --deny) bindings: --principal, --operation and a resource (--topic, --group, --transactional-id or --cluster)", define: defineACLCreate},
		{name: "list", summary: "list bindings, optionally of a --principal and resource (--pattern any by default; match: those applying to the resource)", define: defineACLList},
		{name: "delete", summary: "delete the bindings matching the filter flags (as list's; at least one of them)", define: defineACLDelete},
	}
}

// aclFlags are the binding or filter flags the three actions share.
type aclFlags struct {
	principal, host, operation, pattern *string
	topic, group, txnID                 *string
	cluster, deny                       *bool
}

func defineACLFlags(fs *flag.FlagSet, create bool) *aclFlags {
	f := &aclFlags{}
	pattern, op, host, who := "any", "any", "", "only bindings of this principal (Type:name)"
	if create {
		pattern, op, host, who = "literal", "", "*", "principal, Type:name (User:alice, User:* for everyone)"
	}
	f.principal = fs.String("principal", "", who)
	f.host = fs.String("host", host, "host (an IP address, * for any)")
	f.operation = fs.String("operation", op, "operations, comma-separated: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write (filters also any)")
	f.pattern = fs.String("pattern", pattern, "resource pattern type: literal or prefixed (filters also any, match)")
	f.topic = fs.String("topic", "", "topic name (or prefix, * for every topic)")
	f.group = fs.String("group", "", "consumer group id")
	f.txnID = fs.String("transactional-id", "", "transactional id")
	f.cluster = fs.Bool("cluster", false, "the cluster resource (kafka-cluster)")
	if create {
		f.deny = fs.Bool("deny", false, "a DENY binding (default ALLOW)")
	}
	return f
}

// builder turns the flags into kadm's builder. For filters, an unset
// principal, host or resource matches any.
func (f *aclFlags) builder(create bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	pattern, err := kmsg.ParseACLResourcePatternType(strings.ToLower(*f.pattern))
	if err != nil || create && pattern != kadm.ACLPatternLiteral && pattern != kadm.ACLPatternPrefixed {
		return nil, usagef("--pattern %q: want literal or prefixed (filters also any, match)", *f.pattern)
	}
	b.ResourcePatternType(pattern)
	var ops []kadm.ACLOperation
	for _, o := range splitList(*f.operation) {
		op, err := kmsg.ParseACLOperation(strings.ReplaceAll(strings.ToLower(o), "-", "_"))
		if err != nil || create && op == kmsg.ACLOperationAny {
			return nil, usagef("--operation %q is not an ACL operation", o)
		}
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil, usagef("--operation is required")
	}
	b.Operations(ops...)
	resources := 0
	if *f.topic != "" {
		b.Topics(*f.topic)
		resources++
	}
	if *f.group != "" {
		b.Groups(*f.group)
		resources++
	}
	if *f.txnID != "" {
		b.TransactionalIDs(*f.txnID)
		resources++
	}
	if *f.cluster {
		b.Clusters()
		resources++
	}
	if create {
		if resources == 0 {
			return nil, usagef("give a resource: --topic, --group, --transactional-id or --cluster")
		}
		if *f.principal == "" {
			return nil, usagef("--principal is required")
		}
		if *f.deny {
			b.Deny(*f.principal).DenyHosts(*f.host)
		} else {
			b.Allow(*f.principal).AllowHosts(*f.host)
		}
		return b, nil
	}
	if resources == 0 {
		b.AnyResource()
	}
	var principals, hosts []string
	if *f.principal != "" {
		principals = []string{*f.principal}
	}
	if *f.host != "" {
		hosts = []string{*f.host}
	}
	b.Allow(principals...).AllowHosts(hosts...).Deny(principals...).DenyHosts(hosts...)
	return b, nil
}

// aclRow is one binding as list, create and delete print it.
type aclRow struct {
	ResourceType string `json:"resource_type"`
	Name         string `json:"name"`
	Pattern      string `json:"pattern"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	Error        string `json:"error,omitempty"`
}

func (e *env) emitACLs(rows []aclRow) error {
	return e.emit(rows, func(w io.Writer) {
		row(w, "RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
		for _, r := range rows {
			perm := r.Permission
			if r.Error != "" {
				perm = "error: " + r.Error
			}
			row(w, r.ResourceType, r.Name, r.Pattern, r.Principal, r.Host, r.Operation, perm)
		}
	})
}

func defineACLCreate(fs *flag.FlagSet) runFunc {
	f := defineACLFlags(fs, true)
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("acl create takes no arguments, got %q", pos)
		}
		b, err := f.builder(true)
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		res, err := e.adm.CreateACLs(ctx, b)
		if err != nil {
			return fail("create acls", err, "")
		}
		rows, failed := []aclRow{}, false
		for _, r := range res {
			ar := aclRow{r.Type.String(), r.Name, r.Pattern.String(), r.Principal, r.Host, r.Operation.String(), r.Permission.String(), ""}
			if r.Err != nil {
				ar.Error, failed = describeErr(r.Err, r.ErrMessage), true
			}
			rows = append(rows, ar)
		}
		if err := e.emitACLs(rows); err != nil {
			return err
		}
		if failed {
			return reported{}
		}
		return nil
	}
}

func defineACLList(fs *flag.FlagSet) runFunc {
	f := defineACLFlags(fs, false)
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("acl list takes no arguments, got %q", pos)
		}
		b, err := f.builder(false)
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		res, err := e.adm.DescribeACLs(ctx, b)
		if err != nil {
			return fail("list acls", err, "")
		}
		rows := []aclRow{}
		seen := map[aclRow]bool{} // kadm sends one filter per permission: a binding can come twice
		for _, r := range res {
			if r.Err != nil {
				return fail("list acls", r.Err, r.ErrMessage)
			}
			for _, d := range r.Described {
				ar := aclRow{d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host, d.Operation.String(), d.Permission.String(), ""}
				if !seen[ar] {
					seen[ar] = true
					rows = append(rows, ar)
				}
			}
		}
		return e.emitACLs(rows)
	}
}

func defineACLDelete(fs *flag.FlagSet) runFunc {
	f := defineACLFlags(fs, false)
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("acl delete takes no arguments, got %q", pos)
		}
		if *f.principal == "" && *f.host == "" && *f.topic == "" && *f.group == "" && *f.txnID == "" && !*f.cluster {
			return usagef("acl delete needs a filter: --principal, --host or a resource (refusing to delete every binding)")
		}
		b, err := f.builder(false)
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		res, err := e.adm.DeleteACLs(ctx, b)
		if err != nil {
			return fail("delete acls", err, "")
		}
		rows := []aclRow{}
		seen := map[aclRow]bool{}
		for _, r := range res {
			if r.Err != nil {
				return fail("delete acls", r.Err, r.ErrMessage)
			}
			for _, d := range r.Deleted {
				ar := aclRow{d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host, d.Operation.String(), d.Permission.String(), ""}
				if d.Err != nil {
					ar.Error = describeErr(d.Err, d.ErrMessage)
				}
				if !seen[ar] {
					seen[ar] = true
					rows = append(rows, ar)
				}
			}
		}
		return e.emitACLs(rows)
	}
}
