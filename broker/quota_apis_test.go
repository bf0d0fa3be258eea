package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
)

// TestClientQuotaAPIsRoundTrip: AlterClientQuotas and DescribeClientQuotas
// through kadm: the answering broker's image holds an alteration when its
// answer arrives (read-your-writes), validate_only changes nothing, bad
// entries are INVALID_REQUEST beside good ones, and removals take effect.
func TestClientQuotaAPIsRoundTrip(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	s := func(v string) *string { return &v }
	alice := kadm.ClientQuotaEntity{{Type: "user", Name: s("alice")}, {Type: "client-id"}}
	app := kadm.ClientQuotaEntity{{Type: "client-id", Name: s("app")}}

	res, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
	})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("validate: %v %+v", err, res)
	}
	var any bool
	n.view(func(st *metadata.State) { any = st.HasClientQuotas() })
	if any {
		t.Fatal("validate_only wrote a quota")
	}

	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "request_percentage", Value: 50}}},
		{Entity: app, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2048}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: s("127.0.0.1")}, {Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
		{Entity: app, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
	})
	if err != nil || len(res) != 4 {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("alter: %+v", res)
	}
	for _, i := range []int{2, 3} {
		if !errors.Is(res[i].Err, kerr.InvalidRequest) || res[i].ErrMessage == "" {
			t.Fatalf("entry %d: %v %q, want INVALID_REQUEST with a message", i, res[i].Err, res[i].ErrMessage)
		}
	}
	var v float64
	var ok bool
	n.view(func(st *metadata.State) {
		v, ok = st.ClientQuota(metadata.QuotaEntity{User: metadata.NamedQuota("alice"), ClientID: metadata.DefaultQuota()}, "producer_byte_rate")
	})
	if !ok || v != 1024 {
		t.Fatalf("AlterClientQuotas answered before the broker's image holds it: %v %v", v, ok)
	}

	got, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}})
	if err != nil || len(got) != 1 || got[0].Entity.String() != "{user=alice, client-id=<default>}" ||
		len(got[0].Values) != 2 || got[0].Values[0] != (kadm.ClientQuotaValue{Key: "producer_byte_rate", Value: 1024}) {
		t.Fatalf("describe users: %v %+v", err, got)
	}
	got, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 0, MatchName: s("app")}})
	if err != nil || len(got) != 1 || got[0].Values[0] != (kadm.ClientQuotaValue{Key: "consumer_byte_rate", Value: 2048}) {
		t.Fatalf("describe app strictly: %v %+v", err, got)
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("exact match without a name: %v, want INVALID_REQUEST", err)
	}

	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("remove: %v %+v", err, res)
	}
	got, err = adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(got) != 1 || got[0].Entity.String() != "{client-id=app}" {
		t.Fatalf("describe all after the removal: %v %+v", err, got)
	}
}

// TestClientQuotaAPIsAuthorization: with the authorizer on, a principal
// without DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster is refused with
// CLUSTER_AUTHORIZATION_FAILED, and nothing changes.
func TestClientQuotaAPIsAuthorization(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(nil))
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	s := func(v string) *string { return &v }
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: s("alice")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
	})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	var any bool
	n.view(func(st *metadata.State) { any = st.HasClientQuotas() })
	if any {
		t.Fatal("a refused AlterClientQuotas wrote a quota")
	}
}
