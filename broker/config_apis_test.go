package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

// describeConfig finds name in a DescribeConfigs resource.
func describedConfig(t *testing.T, res kmsg.DescribeConfigsResponseResource, name string) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	for _, c := range res.Configs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s %q: no config %s", res.ResourceType, res.ResourceName, name)
	return kmsg.DescribeConfigsResponseResourceConfig{}
}

func describeConfigsReq(v int16, synonyms, docs bool, res ...kmsg.DescribeConfigsRequestResource) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(v)
	req.IncludeSynonyms, req.IncludeDocumentation = synonyms, docs
	req.Resources = res
	return req
}

func configResource(typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsRequestResource {
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, names
	return r
}

// chainOf renders synonyms as "name=value/SOURCE,...".
func chainOf(c kmsg.DescribeConfigsResponseResourceConfig) string {
	var parts []string
	for _, s := range c.ConfigSynonyms {
		v := "<nil>"
		if s.Value != nil {
			v = *s.Value
		}
		parts = append(parts, s.Name+"="+v+"/"+s.Source.String())
	}
	return strings.Join(parts, ",")
}

// TestDescribeConfigsTopicEveryVersion: every topic config is listed with
// Kafka's precedence (topic, dynamic broker, dynamic default, static,
// default), synonyms from v1 when asked, types and documentation from v3,
// IsDefault in v0, and the ConfigNames filter.
func TestDescribeConfigsTopicEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"log.retention.ms": "3600000"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "described", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("1048576")})
	// A cluster-wide dynamic default for max.message.bytes.
	if rs, err := adm.AlterBrokerConfigsState(testCtx(t), []kadm.AlterConfig{{Name: "message.max.bytes", Value: kmsg.StringPtr("2000000")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("alter cluster default: %v %+v", err, rs)
	}

	// kadm first, as clients see it.
	rcs, err := adm.DescribeTopicConfigs(testCtx(t), "described")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("described", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v %v", err, rc.Err)
	}
	if len(rc.Configs) != len(metadata.TopicConfigNames()) {
		t.Fatalf("%d configs, want every topic config (%d)", len(rc.Configs), len(metadata.TopicConfigNames()))
	}

	c := dialRaw(t, n)
	for v := int16(0); v <= kmsg.NewPtrDescribeConfigsRequest().MaxVersion(); v++ {
		resp := c.roundTrip(describeConfigsReq(v, true, true, configResource(kmsg.ConfigResourceTypeTopic, "described"))).(*kmsg.DescribeConfigsResponse)
		res := resp.Resources[0]
		if res.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, res.ErrorCode)
		}
		for _, want := range []struct {
			name, value string
			source      kmsg.ConfigSource
			chain       string
			typ         kmsg.ConfigType
		}{
			{"segment.bytes", "1048576", kmsg.ConfigSourceDynamicTopicConfig,
				"segment.bytes=1048576/DYNAMIC_TOPIC_CONFIG,log.segment.bytes=1073741824/DEFAULT_CONFIG", kmsg.ConfigTypeInt},
			{"retention.ms", "3600000", kmsg.ConfigSourceStaticBrokerConfig,
				"log.retention.ms=3600000/STATIC_BROKER_CONFIG,log.retention.ms=604800000/DEFAULT_CONFIG", kmsg.ConfigTypeLong},
			{"max.message.bytes", "2000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
				"message.max.bytes=2000000/DYNAMIC_DEFAULT_BROKER_CONFIG,message.max.bytes=1048588/DEFAULT_CONFIG", kmsg.ConfigTypeInt},
			{"cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig, "log.cleanup.policy=delete/DEFAULT_CONFIG", kmsg.ConfigTypeList},
			{"remote.storage.enable", "false", kmsg.ConfigSourceDefaultConfig, "remote.storage.enable=false/DEFAULT_CONFIG", kmsg.ConfigTypeBoolean},
		} {
			got := describedConfig(t, res, want.name)
			if got.Value == nil || *got.Value != want.value || got.ReadOnly || got.IsSensitive {
				t.Errorf("v%d %s: value %v read-only %v sensitive %v", v, want.name, got.Value, got.ReadOnly, got.IsSensitive)
			}
			if v == 0 {
				if got.IsDefault != (want.source == kmsg.ConfigSourceDefaultConfig) {
					t.Errorf("v0 %s: IsDefault %v", want.name, got.IsDefault)
				}
				continue
			}
			if got.Source != want.source {
				t.Errorf("v%d %s: source %s, want %s", v, want.name, got.Source, want.source)
			}
			if ch := chainOf(got); ch != want.chain {
				t.Errorf("v%d %s: synonyms %s, want %s", v, want.name, ch, want.chain)
			}
			if v >= 3 && (got.ConfigType != want.typ || got.Documentation == nil || *got.Documentation == "") {
				t.Errorf("v%d %s: type %s doc %v", v, want.name, got.ConfigType, got.Documentation)
			}
		}
	}

	// Without IncludeSynonyms/IncludeDocumentation, neither; ConfigNames
	// filters (unknown names are left out).
	resp := c.roundTrip(describeConfigsReq(4, false, false,
		configResource(kmsg.ConfigResourceTypeTopic, "described", "segment.bytes", "no.such.config"))).(*kmsg.DescribeConfigsResponse)
	res := resp.Resources[0]
	if len(res.Configs) != 1 || res.Configs[0].Name != "segment.bytes" {
		t.Fatalf("filtered: %+v", res.Configs)
	}
	if len(res.Configs[0].ConfigSynonyms) != 0 || res.Configs[0].Documentation != nil || res.Configs[0].ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("unrequested synonyms or docs: %+v", res.Configs[0])
	}

	// Errors per resource; the other resources of the request still answer.
	resp = c.roundTrip(describeConfigsReq(4, false, false,
		configResource(kmsg.ConfigResourceTypeTopic, "missing"),
		configResource(kmsg.ConfigResourceTypeTopic, "bad/name"),
		configResource(kmsg.ConfigResourceTypeTopic, "described", "segment.bytes"),
		configResource(kmsg.ConfigResourceTypeBrokerLogger, "1"),
	)).(*kmsg.DescribeConfigsResponse)
	for i, want := range []int16{kerr.UnknownTopicOrPartition.Code, kerr.InvalidTopicException.Code, 0, kerr.InvalidRequest.Code} {
		r := resp.Resources[i]
		if r.ErrorCode != want || (want != 0 && (r.ErrorMessage == nil || len(r.Configs) != 0)) {
			t.Errorf("resource %d (%s): code %d msg %v configs %d, want code %d", i, r.ResourceName, r.ErrorCode, r.ErrorMessage, len(r.Configs), want)
		}
	}
}

// TestDescribeConfigsBrokerResource: this broker's id lists every setting
// (read-only unless dynamic), "" lists only the dynamic cluster defaults,
// another id or a non-integer is INVALID_REQUEST, as Kafka.
func TestDescribeConfigsBrokerResource(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"num.partitions": "3"})
	adm := newAdmin(t, n)
	c := dialRaw(t, n)
	describe := func(name string, names ...string) kmsg.DescribeConfigsResponseResource {
		t.Helper()
		resp := c.roundTrip(describeConfigsReq(4, true, true, configResource(kmsg.ConfigResourceTypeBroker, name, names...))).(*kmsg.DescribeConfigsResponse)
		return resp.Resources[0]
	}
	res := describe("1")
	unset := 0 // settings without a default and not set are not described
	for _, s := range Settings {
		if s.Default == "" {
			unset++
		}
	}
	if res.ErrorCode != 0 || len(res.Configs) < len(Settings)-unset {
		t.Fatalf("broker 1: code %d, %d configs", res.ErrorCode, len(res.Configs))
	}
	np := describedConfig(t, res, "num.partitions")
	if *np.Value != "3" || np.Source != kmsg.ConfigSourceStaticBrokerConfig || !np.ReadOnly || np.ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("num.partitions: %+v", np)
	}
	if ch := chainOf(np); ch != "num.partitions=3/STATIC_BROKER_CONFIG,num.partitions=1/DEFAULT_CONFIG" {
		t.Fatalf("num.partitions synonyms %s", ch)
	}
	lr := describedConfig(t, res, "log.retention.ms")
	if *lr.Value != "604800000" || lr.Source != kmsg.ConfigSourceDefaultConfig || lr.ReadOnly {
		t.Fatalf("log.retention.ms: %+v", lr)
	}
	if md := describedConfig(t, res, "metadata.log.dir"); md.Value == nil || *md.Value != n.cfg.LogDir {
		t.Fatalf("metadata.log.dir: %v", md.Value)
	}
	if res := describe(""); res.ErrorCode != 0 || len(res.Configs) != 0 {
		t.Fatalf("cluster defaults before any change: code %d configs %+v", res.ErrorCode, res.Configs)
	}

	// Dynamic: per broker beats cluster default beats static.
	if rs, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("7200000")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("cluster default: %v %+v", err, rs)
	}
	if rs, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("3600000")}}, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("broker 1: %v %+v", err, rs)
	}
	lr = describedConfig(t, describe("1", "log.retention.ms"), "log.retention.ms")
	want := "log.retention.ms=3600000/DYNAMIC_BROKER_CONFIG,log.retention.ms=7200000/DYNAMIC_DEFAULT_BROKER_CONFIG,log.retention.ms=604800000/DEFAULT_CONFIG"
	if *lr.Value != "3600000" || lr.Source != kmsg.ConfigSourceDynamicBrokerConfig || chainOf(lr) != want {
		t.Fatalf("log.retention.ms after dynamic changes: %s %s synonyms %s", *lr.Value, lr.Source, chainOf(lr))
	}
	def := describe("")
	if len(def.Configs) != 1 || def.Configs[0].Name != "log.retention.ms" || *def.Configs[0].Value != "7200000" ||
		def.Configs[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster defaults: %+v", def.Configs)
	}

	for _, name := range []string{"2", "x1"} {
		if res := describe(name); res.ErrorCode != kerr.InvalidRequest.Code || res.ErrorMessage == nil {
			t.Errorf("broker %q: code %d", name, res.ErrorCode)
		}
	}
	// kadm's broker describe goes to the broker itself.
	rcs, err := adm.DescribeBrokerConfigs(testCtx(t), 1)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil || len(rcs[0].Configs) == 0 {
		t.Fatalf("kadm describe broker: %v %+v", err, rcs)
	}
}

// TestDescribeConfigsTablesMatchTheController: the describe tables cover
// exactly what the controller accepts, and the default each topic config
// reports is what storage runs with.
func TestDescribeConfigsTablesMatchTheController(t *testing.T) {
	names := metadata.TopicConfigNames()
	if len(topicConfigDefs) != len(names) {
		t.Errorf("%d described topic configs, controller accepts %d", len(topicConfigDefs), len(names))
	}
	n := &Node{cfg: DefaultConfig()}
	st := metadata.NewState()
	base := n.cfg.Storage
	for _, name := range names {
		d, ok := topicConfigDefs[name]
		if !ok {
			t.Errorf("topic config %s not described", name)
			continue
		}
		chain := n.topicConfigChain(st, "t", name)
		if len(chain) == 0 || chain[len(chain)-1].source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s: chain %+v has no default", name, chain)
			continue
		}
		def := chain[0].value
		if err := metadata.ValidateTopicConfig(name, def); err != nil {
			t.Errorf("%s: reported default %q is refused by the controller: %v", name, def, err)
		}
		if got := topicStorageConfig(base, map[string]string{name: def}); got != base {
			t.Errorf("%s: reported default %q is not what storage runs with (%+v vs %+v)", name, def, got, base)
		}
		if d.broker != "" {
			if _, inSettings := lookupSetting(d.broker); inSettings == (d.def != "") {
				t.Errorf("%s: broker synonym %s: default must come from Settings exactly when it is there", name, d.broker)
			}
		}
	}
	for name := range dynamicBrokerConfigs {
		s, ok := lookupSetting(name)
		def := s.Default
		if !ok {
			def = brokerOnlyConfigDefs[name].def
		}
		if err := metadata.ValidateBrokerConfig(name, def); err != nil {
			t.Errorf("dynamic %s=%q refused by the controller: %v", name, def, err)
		}
	}
	for _, name := range brokerConfigNames() {
		if dynamicBrokerConfigs[name] {
			continue
		}
		s, _ := lookupSetting(name)
		if err := metadata.ValidateBrokerConfig(name, s.Default); err == nil {
			t.Errorf("%s is reported read-only but the controller accepts changing it", name)
		}
	}
}

// alterReq builds a full-replace AlterConfigs request of one topic.
func alterReq(v int16, validate bool, topic string, kv ...string) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.SetVersion(v)
	req.ValidateOnly = validate
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	return req
}

// topicOverrides returns the configs set on the topic in n's view.
func topicOverrides(n *Node, topic string) map[string]string {
	var m map[string]string
	n.view(func(st *metadata.State) { m = st.TopicConfig(topic) })
	return m
}

// TestAlterConfigsReplacesEveryVersion: full replace (unlisted configs go
// back to their defaults), visible at once to DescribeConfigs, validate-only
// changes nothing, INVALID_CONFIG with a message, unknown topics.
func TestAlterConfigsReplacesEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "replaced", 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000000")})
	c := dialRaw(t, n)
	for v := int16(0); v <= kmsg.NewPtrAlterConfigsRequest().MaxVersion(); v++ {
		seg := []string{"100000", "200000", "300000"}[v]
		resp := c.roundTrip(alterReq(v, false, "replaced", "segment.bytes", seg)).(*kmsg.AlterConfigsResponse)
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || resp.Resources[0].ResourceName != "replaced" {
			t.Fatalf("v%d: %+v", v, resp.Resources)
		}
		// Read your write: the next request on the connection sees it.
		d := c.roundTrip(describeConfigsReq(4, false, false, configResource(kmsg.ConfigResourceTypeTopic, "replaced", "segment.bytes", "retention.ms"))).(*kmsg.DescribeConfigsResponse)
		sb, rm := describedConfig(t, d.Resources[0], "segment.bytes"), describedConfig(t, d.Resources[0], "retention.ms")
		if *sb.Value != seg || sb.Source != kmsg.ConfigSourceDynamicTopicConfig || rm.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("v%d: after replace segment.bytes=%s (%s), retention.ms %s", v, *sb.Value, sb.Source, rm.Source)
		}
	}

	// Validate-only: accepted, nothing changes.
	before := topicOverrides(n, "replaced")
	resp := c.roundTrip(alterReq(2, true, "replaced", "segment.ms", "1000")).(*kmsg.AlterConfigsResponse)
	if resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("validate-only: code %d", resp.Resources[0].ErrorCode)
	}
	// ... and refused values are refused in validate-only too.
	resp = c.roundTrip(alterReq(2, true, "replaced", "segment.ms", "0")).(*kmsg.AlterConfigsResponse)
	if resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("validate-only of a bad value: code %d", resp.Resources[0].ErrorCode)
	}
	for _, bad := range [][]string{{"segment.bytes", "-5"}, {"no.such.config", "1"}, {"cleanup.policy", "shred"}} {
		resp = c.roundTrip(alterReq(1, false, "replaced", bad...)).(*kmsg.AlterConfigsResponse)
		r := resp.Resources[0]
		if r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, bad[0]) {
			t.Errorf("%s=%s: code %d message %v", bad[0], bad[1], r.ErrorCode, r.ErrorMessage)
		}
	}
	if after := topicOverrides(n, "replaced"); len(after) != len(before) || after["segment.bytes"] != before["segment.bytes"] {
		t.Fatalf("refused or validate-only changes applied: %v -> %v", before, after)
	}
	resp = c.roundTrip(alterReq(0, false, "missing", "segment.bytes", "100000")).(*kmsg.AlterConfigsResponse)
	if resp.Resources[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", resp.Resources[0].ErrorCode)
	}

	// kadm's State (full replace) alter, and its validate-only twin.
	rs, err := adm.AlterTopicConfigsState(testCtx(t), []kadm.AlterConfig{{Name: "retention.bytes", Value: kmsg.StringPtr("123456")}}, "replaced")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("kadm alter: %v %+v", err, rs)
	}
	if got := topicOverrides(n, "replaced"); len(got) != 1 || got["retention.bytes"] != "123456" {
		t.Fatalf("after kadm full replace: %v", got)
	}
	rs, err = adm.ValidateAlterTopicConfigsState(testCtx(t), []kadm.AlterConfig{{Name: "retention.bytes", Value: kmsg.StringPtr("x")}}, "replaced")
	if err != nil || !errorIs(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("kadm validate bad value: %v %+v", err, rs)
	}
}

func errorIs(err error, want *kerr.Error) bool {
	ke, ok := err.(*kerr.Error)
	return ok && ke.Code == want.Code
}

// TestIncrementalAlterConfigsOpsEveryVersion: SET, DELETE, APPEND and
// SUBTRACT (list configs only), validate-only, errors.
func TestIncrementalAlterConfigsOpsEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "incr", 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000000")})
	c := dialRaw(t, n)
	op := func(v int16, validate bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.SetVersion(v)
		req.ValidateOnly = validate
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeTopic, "incr", ops
		req.Resources = append(req.Resources, r)
		return c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	}
	entry := func(o kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		e := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		e.Op, e.Name, e.Value = o, name, value
		return e
	}
	for v := int16(0); v <= kmsg.NewPtrIncrementalAlterConfigsRequest().MaxVersion(); v++ {
		// SET keeps the other configs (unlike AlterConfigs).
		if r := op(v, false, entry(kmsg.IncrementalAlterConfigOpSet, "segment.bytes", kmsg.StringPtr("500000"))); r.ErrorCode != 0 {
			t.Fatalf("v%d set: %d %v", v, r.ErrorCode, r.ErrorMessage)
		}
		if got := topicOverrides(n, "incr"); got["segment.bytes"] != "500000" || got["retention.ms"] != "1000000" {
			t.Fatalf("v%d after set: %v", v, got)
		}
		// APPEND to the inherited list, then SUBTRACT.
		if r := op(v, false, entry(kmsg.IncrementalAlterConfigOpAppend, "cleanup.policy", kmsg.StringPtr("compact"))); r.ErrorCode != 0 {
			t.Fatalf("v%d append: %d %v", v, r.ErrorCode, r.ErrorMessage)
		}
		if r := op(v, false, entry(kmsg.IncrementalAlterConfigOpAppend, "cleanup.policy", kmsg.StringPtr("delete"))); r.ErrorCode != 0 {
			t.Fatalf("v%d append: %d %v", v, r.ErrorCode, r.ErrorMessage)
		}
		if got := topicOverrides(n, "incr")["cleanup.policy"]; got != "compact,delete" {
			t.Fatalf("v%d after appends: cleanup.policy=%q", v, got)
		}
		if r := op(v, false, entry(kmsg.IncrementalAlterConfigOpSubtract, "cleanup.policy", kmsg.StringPtr("compact"))); r.ErrorCode != 0 {
			t.Fatalf("v%d subtract: %d %v", v, r.ErrorCode, r.ErrorMessage)
		}
		if got := topicOverrides(n, "incr")["cleanup.policy"]; got != "delete" {
			t.Fatalf("v%d after subtract: cleanup.policy=%q", v, got)
		}
		// DELETE goes back to the inherited value.
		if r := op(v, false, entry(kmsg.IncrementalAlterConfigOpDelete, "segment.bytes", nil), entry(kmsg.IncrementalAlterConfigOpDelete, "cleanup.policy", nil)); r.ErrorCode != 0 {
			t.Fatalf("v%d delete: %d %v", v, r.ErrorCode, r.ErrorMessage)
		}
		if got := topicOverrides(n, "incr"); len(got) != 1 || got["retention.ms"] != "1000000" {
			t.Fatalf("v%d after delete: %v", v, got)
		}
	}
	// Validate-only: nothing changes, bad values still refused.
	if r := op(1, true, entry(kmsg.IncrementalAlterConfigOpSet, "segment.bytes", kmsg.StringPtr("600000"))); r.ErrorCode != 0 {
		t.Fatalf("validate-only: %d", r.ErrorCode)
	}
	if _, set := topicOverrides(n, "incr")["segment.bytes"]; set {
		t.Fatal("validate-only change applied")
	}
	for _, bad := range []struct {
		e    kmsg.IncrementalAlterConfigsRequestResourceConfig
		code int16
	}{
		{entry(kmsg.IncrementalAlterConfigOpSet, "segment.bytes", kmsg.StringPtr("ten")), kerr.InvalidConfig.Code},
		{entry(kmsg.IncrementalAlterConfigOpAppend, "segment.bytes", kmsg.StringPtr("1")), kerr.InvalidRequest.Code},
		{entry(kmsg.IncrementalAlterConfigOpSubtract, "retention.ms", kmsg.StringPtr("1")), kerr.InvalidRequest.Code},
		{entry(kmsg.IncrementalAlterConfigOpSet, "segment.bytes", nil), kerr.InvalidRequest.Code},
		{entry(kmsg.IncrementalAlterConfigOp(9), "segment.bytes", kmsg.StringPtr("1")), kerr.InvalidRequest.Code},
	} {
		if r := op(1, false, bad.e); r.ErrorCode != bad.code || r.ErrorMessage == nil {
			t.Errorf("op %d %s: code %d, want %d (message %v)", bad.e.Op, bad.e.Name, r.ErrorCode, bad.code, r.ErrorMessage)
		}
	}
	if got := topicOverrides(n, "incr"); len(got) != 1 {
		t.Fatalf("refused changes applied: %v", got)
	}
	// kadm's incremental alter.
	rs, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kmsg.StringPtr("60000")}}, "incr")
	if err != nil || rs[0].Err != nil || topicOverrides(n, "incr")["segment.ms"] != "60000" {
		t.Fatalf("kadm incremental: %v %+v %v", err, rs, topicOverrides(n, "incr"))
	}
}

// TestAPIVersionsAdvertisesConfigAndClusterAPIs: every key of these
// handlers from v0 to kmsg's newest, and each version really answers.
func TestAPIVersionsAdvertisesConfigAndClusterAPIs(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "v", 1, nil)
	c := dialRaw(t, n)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for _, key := range []int16{32, 33, 35, 37, 44, 60} {
		max := kmsg.RequestForKey(key).MaxVersion()
		if got[key] != [2]int16{0, max} {
			t.Errorf("key %d (%s) advertised %v, want [0 %d]", key, kmsg.NameForKey(key), got[key], max)
		}
		for v := int16(0); v <= max; v++ {
			r := kmsg.RequestForKey(key)
			r.SetVersion(v)
			switch x := r.(type) {
			case *kmsg.DescribeConfigsRequest:
				x.Resources = []kmsg.DescribeConfigsRequestResource{configResource(kmsg.ConfigResourceTypeTopic, "v")}
			case *kmsg.CreatePartitionsRequest:
				ct := kmsg.NewCreatePartitionsRequestTopic()
				ct.Topic, ct.Count = "v", 1 // not above 1: INVALID_PARTITIONS
				x.Topics = append(x.Topics, ct)
			case *kmsg.DescribeClusterRequest:
				x.EndpointType = endpointTypeBroker
			}
			if resp := c.roundTrip(r); resp.Key() != key {
				t.Errorf("key %d v%d: answered key %d", key, v, resp.Key())
			}
		}
	}
}

// TestIncrementalAlterConfigsDuplicateKeyRefusesThatResource: a config
// named twice is INVALID_REQUEST for its resource only; the others of the
// request go ahead and answer in request order.
func TestIncrementalAlterConfigsDuplicateKeyRefusesThatResource(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "dup", 1, nil)
	createTopic(t, adm, "fine", 1, nil)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	for _, name := range []string{"dup", "fine", "missing"} {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
		e := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		e.Op, e.Name, e.Value = kmsg.IncrementalAlterConfigOpSet, "segment.ms", kmsg.StringPtr("60000")
		r.Configs = append(r.Configs, e)
		if name == "dup" {
			r.Configs = append(r.Configs, e)
		}
		req.Resources = append(req.Resources, r)
	}
	resp := dialRaw(t, n).roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	for i, want := range []int16{kerr.InvalidRequest.Code, 0, kerr.UnknownTopicOrPartition.Code} {
		r := resp.Resources[i]
		if r.ResourceName != req.Resources[i].ResourceName || r.ErrorCode != want {
			t.Errorf("resource %d: %s code %d, want %s code %d", i, r.ResourceName, r.ErrorCode, req.Resources[i].ResourceName, want)
		}
	}
	if _, set := topicOverrides(n, "dup")["segment.ms"]; set {
		t.Fatal("refused resource changed")
	}
	if topicOverrides(n, "fine")["segment.ms"] != "60000" {
		t.Fatal("accepted resource not changed")
	}
}

// TestAlteredConfigsAndPartitionsSurviveRestart: after a restart on the
// same directory the logs open with the altered configs (topic and dynamic
// broker ones) and every added partition is back.
func TestAlteredConfigsAndPartitionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "kept", 1, nil)
	if rs, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Name: "segment.bytes", Value: kmsg.StringPtr("70000")}}, "kept"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter topic: %v %+v", err, rs)
	}
	if rs, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: "log.retention.bytes", Value: kmsg.StringPtr("9000000")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("alter cluster default: %v %+v", err, rs)
	}
	if rs, err := adm.CreatePartitions(testCtx(t), 2, "kept"); err != nil || rs["kept"].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, rs)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, dir, nil)
	for p := int32(0); p < 3; p++ {
		hp := n2.partition("kept", p)
		if hp == nil {
			t.Fatalf("partition %d missing after restart", p)
		}
		if c := hp.log.Config(); c.SegmentBytes != 70000 || c.RetentionBytes != 9000000 {
			t.Fatalf("partition %d after restart: segment.bytes %d retention.bytes %d", p, c.SegmentBytes, c.RetentionBytes)
		}
	}
}
