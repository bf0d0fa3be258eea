package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// alterGroupConfigs is one IncrementalAlterConfigs SET of configs on the
// GROUP resource groupID; it returns the resource's error code.
func alterGroupConfigs(t *testing.T, c *rawConn, groupID string, kv ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
	for i := 0; i+1 < len(kv); i += 2 {
		e := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		e.Name, e.Value, e.Op = kv[i], kmsg.StringPtr(kv[i+1]), kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, e)
	}
	req.Resources = append(req.Resources, res)
	resp := c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 {
		t.Fatalf("alter: %d resources", len(resp.Resources))
	}
	return resp.Resources[0].ErrorCode
}

// describeGroupConfigs returns the GROUP resource's configs by name.
func describeGroupConfigs(t *testing.T, c *rawConn, groupID string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
	req.Resources = append(req.Resources, rr)
	req.IncludeSynonyms = true
	resp := c.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe group %q: %+v", groupID, resp.Resources)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// TestConsumerGroupPerGroupConfigs: consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms set on a GROUP resource through
// IncrementalAlterConfigs are validated against this broker's
// group.consumer.{min,max}.* bounds (not Kafka's defaults: 600 ms is below
// the default minimum of 45 s), shown by DescribeConfigs (GROUP_CONFIG,
// else the broker's setting as DEFAULT_CONFIG, as Kafka), returned to the group's members as their
// heartbeat interval, and fence a silent member after the group's session
// timeout rather than the broker's (10 s here).
func TestConsumerGroupPerGroupConfigs(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{
		"group.consumer.session.timeout.ms":        "10000",
		"group.consumer.min.session.timeout.ms":    "100",
		"group.consumer.min.heartbeat.interval.ms": "50",
		"group.consumer.heartbeat.interval.ms":     "100",
	}))
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)

	for _, bad := range [][]string{
		{"consumer.session.timeout.ms", "50"},       // below the broker's min (100)
		{"consumer.session.timeout.ms", "70000"},    // above the max (60000)
		{"consumer.heartbeat.interval.ms", "20000"}, // above the max (15000)
		{"consumer.heartbeat.interval.ms", "10000"}, // not below the inherited session timeout (10000)
		{"session.timeout.ms", "1000"},              // not a group config
	} {
		if code := alterGroupConfigs(t, c, "g", bad...); code != kerr.InvalidConfig.Code {
			t.Errorf("set %v: code %d, want INVALID_CONFIG", bad, code)
		}
	}
	if code := alterGroupConfigs(t, c, "g", "consumer.session.timeout.ms", "600", "consumer.heartbeat.interval.ms", "250"); code != 0 {
		t.Fatalf("set group configs: %v", kerr.ErrorForCode(code))
	}
	got := describeGroupConfigs(t, c, "g")
	for name, want := range map[string]string{"consumer.session.timeout.ms": "600", "consumer.heartbeat.interval.ms": "250"} {
		cfg := got[name]
		if cfg.Value == nil || *cfg.Value != want || cfg.Source != kmsg.ConfigSourceGroupConfig {
			t.Errorf("group g %s: %+v, want %s from GROUP_CONFIG", name, cfg, want)
		}
	}
	other := describeGroupConfigs(t, c, "other")["consumer.session.timeout.ms"]
	if other.Value == nil || *other.Value != "10000" || other.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("group other session timeout: %+v, want the broker's 10000", other)
	}

	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	quiet := join848(t, c, "g", "quiet")
	joined := time.Now()
	if quiet.ErrorCode != 0 {
		t.Fatalf("join quiet: %d", quiet.ErrorCode)
	}
	if quiet.HeartbeatIntervalMillis != 250 {
		t.Errorf("heartbeat interval %d, want the group's 250", quiet.HeartbeatIntervalMillis)
	}
	r := join848(t, c, "g", "busy")
	if r.ErrorCode != 0 {
		t.Fatalf("join busy: %d", r.ErrorCode)
	}
	cl := newClient(t, n)
	epoch := r.MemberEpoch
	testutil.Eventually(t, testWait, func() error {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.SetVersion(1)
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "busy", epoch, -1
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			return kerr.ErrorForCode(r.ErrorCode)
		}
		epoch = r.MemberEpoch
		if d := describe848(t, cl, "g"); len(d.Members) != 1 {
			return fmt.Errorf("%d members", len(d.Members))
		}
		return nil
	}, "the quiet member to be fenced")
	// The broker's 10 s session cannot have fenced it this early.
	if el := time.Since(joined); el >= 10*time.Second {
		t.Errorf("quiet fenced after %v: the group's 600 ms session timeout did not apply", el)
	}
}
