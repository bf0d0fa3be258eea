package dashboards

// The test that keeps the dashboards and alerts from drifting: a real
// node with tiering on, a real load, a real Prometheus scraping it on
// loopback, and every PromQL expression of dashboards/*.json and
// alerts.yml evaluated through Prometheus's HTTP API.

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/testutil"
)

// conditionalSeries are the metrics the dashboards and alerts may name
// although this test cannot make them appear. An expression that returns
// nothing passes only if it names one of them (it must still parse and
// execute). A conditional series that does exist is checked like any
// other (selectors and whole expressions must return data), and the test
// logs that it should leave this list; a name no expression uses fails.
var conditionalSeries = map[string]string{
	// Empty: every series the dashboards and alerts name appears on the
	// test's node. The strata_tiering_* series were listed here ("remove
	// when tiering lands (issue 6)") until the uploader and remote reader
	// were wired into the broker (c3c1161). Add a name here only with the
	// reason the test cannot create it, e.g.
	//	"strata_partition_under_min_isr": "needs replication (a second broker)",
}

// testVars are what the Grafana variables become in the test's queries:
// every multi-value variable is "All" (its allValue, .*; instance has no
// allValue, so Grafana would send the regex of all its values, which .*
// covers here: one node), and the interval built-ins become a window that
// covers the whole scrape history of the test (several scrapes, so rate()
// has at least two samples).
var testVars = map[string]string{
	"instance":        ".*",
	"topic":           ".*",
	"group":           ".*",
	"__rate_interval": "1m",
	"__interval":      "1m",
	"__range":         "1m",
}

const (
	scrapeInterval = time.Second
	loadFor        = 6 * time.Second
	testTimeout    = 80 * time.Second
)

// TestDashboardsAndAlertsAgainstPrometheus starts a node with the fs
// remote tier on, a tiered topic with small segments, and a load (a
// producer, a consumer group committing, one request and one partition
// error on purpose), scraped every second by Prometheus running
// dashboards/prometheus.yml and alerts.yml. Then: every dashboard
// expression and every selector in it returns data (or names a
// conditional series); every alert expression executes, each of its
// selectors has data, and none fires on this healthy node; every rule is
// evaluated by Prometheus without error.
func TestDashboardsAndAlertsAgainstPrometheus(t *testing.T) {
	bin := needTool(t, "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	exprs, err := Exprs(Files)
	if err != nil {
		t.Fatal(err)
	}
	ruleExprs, err := RuleExprs(Files, "alerts.yml")
	if err != nil {
		t.Fatal(err)
	}

	n := startTieredNode(t)
	prom := startPrometheus(t, bin, n.AdminAddr(), scrapeInterval)
	runLoad(ctx, t, n)
	runSecurityLoad(ctx, t, n)
	loaded := time.Now()

	// Wait until the uploader has caught up with the load (a healthy node:
	// no upload backlog left), as the node itself says (its tier status is
	// computed afresh; the lag gauges are republished only at the end of a
	// pass or on the uploader's 5 s tick, so a scrape can still show a
	// stale 0 taken before the last rolls), then until Prometheus has
	// scraped the node after that (so the last sample holds the load's
	// effect and the caught-up lag), and the rules have been evaluated on
	// that scrape.
	var caughtUp time.Time
	waitFor(ctx, t, "Prometheus scraped the node after the load and the upload, then evaluated the rules", func() (bool, error) {
		if caughtUp.IsZero() {
			lag, err := nodeUploadLagSegments(ctx, n.AdminAddr())
			if err != nil || lag != 0 {
				return false, err
			}
			caughtUp = time.Now()
		}
		v, err := prom.scalarOf(ctx, `sum(strata_group_offset_commits_total{job="strata"})`)
		if err != nil || v <= 0 {
			return false, err
		}
		lag, err := prom.scalarOf(ctx, `max(strata_tiering_upload_lag_segments{job="strata"})`)
		if err != nil || lag != 0 {
			return false, err
		}
		ups, err := prom.scalarOf(ctx, `count_over_time(up{job="strata"}[1m])`)
		if err != nil || ups < 5 {
			return false, err
		}
		ts, err := prom.scalarOf(ctx, `timestamp(up{job="strata"})`)
		scraped := time.UnixMilli(int64(ts * 1000))
		if err != nil || !scraped.After(loaded) || !scraped.After(caughtUp) {
			return false, err
		}
		evaluated, err := prom.rulesEvaluated(ctx)
		return err == nil && evaluated.After(scraped), err
	})

	used := map[string]bool{}
	check := func(e Expr, alert bool) {
		t.Helper()
		q, err := Substitute(e.Expr, testVars)
		if err != nil {
			t.Errorf("%s: %v", e, err)
			return
		}
		res, err := prom.query(ctx, q)
		if err != nil {
			t.Errorf("%s:\n\tquery %s\n\tfails: %v", e, q, err)
			return
		}
		// A selector with no series fails the expression unless its
		// metric is conditional; a conditional metric that exists is
		// checked like any other.
		conditional := ""
		var empty []string
		for _, sel := range Selectors(q) {
			name := MetricName(sel)
			used[name] = true
			r, err := prom.query(ctx, sel)
			if err != nil {
				t.Errorf("%s: selector %s fails: %v", e, sel, err)
				continue
			}
			if r.nonEmpty() {
				continue
			}
			if why, ok := conditionalSeries[name]; ok {
				conditional = name + " (" + why + ")"
				continue
			}
			empty = append(empty, sel)
		}
		if len(Selectors(q)) == 0 {
			t.Errorf("%s: names no strata_, go_, process_ or up series", e)
		}
		if len(empty) > 0 {
			t.Errorf("%s: these selectors match no series on a running node: %s", e, strings.Join(empty, ", "))
		}
		switch {
		case alert && res.nonEmpty():
			t.Errorf("%s: fires on a healthy node: %s", e, truncate(res.Result))
		case !alert && !res.nonEmpty() && conditional == "":
			t.Errorf("%s:\n\tquery %s\n\treturns no data", e, q)
		case !alert && !res.nonEmpty():
			t.Logf("%s: empty, allowed: names conditional series %s", e.Where, conditional)
		}
	}
	for _, e := range exprs {
		check(e, false)
	}
	for _, e := range ruleExprs {
		check(e, true)
	}
	t.Logf("%d dashboard expressions, %d alert expressions checked", len(exprs), len(ruleExprs))

	// The conditional list must not outlive its reason.
	for name, why := range conditionalSeries {
		if !used[name] {
			t.Errorf("conditionalSeries lists %s (%s) but no dashboard or alert names it: remove it", name, why)
		}
		r, err := prom.query(ctx, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if r.nonEmpty() {
			// This run created the condition: the allowance is stale.
			t.Errorf("%s exists on a running node: remove it from conditionalSeries (was: %s)", name, why)
		}
	}

	// Prometheus itself loaded alerts.yml and evaluates every rule
	// without error.
	checkRulesHealthy(ctx, t, prom, len(ruleExprs))
}

// startTieredNode opens a combined-mode node on loopback port 0 with its
// admin listener, and the remote tier on the fs backend.
// nodeUploadLagSegments is the node's own upload lag in sealed segments,
// summed over its tiered partitions, from its admin listener's
// /v1/tier/status (computed when asked, unlike the gauges).
func nodeUploadLagSegments(ctx context.Context, admin string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/v1/tier/status", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v1/tier/status: %s", resp.Status)
	}
	var rows []broker.TierStatusRow
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, errors.New("GET /v1/tier/status: no tiered partition")
	}
	lag := 0
	for _, r := range rows {
		lag += r.UploadLagSegments
	}
	return lag, nil
}

func startTieredNode(t *testing.T) *broker.Node {
	t.Helper()
	dir := t.TempDir()
	props := map[string]string{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_dash="dash-secret";`,
		"controller.quorum.voters":                            "1@127.0.0.1:0",
		"log.dirs":                                            dir + "/data",
		"admin.listener":                                      "127.0.0.1:0",
		"controller.quorum.election.timeout.ms":               "300",
		"group.initial.rebalance.delay.ms":                    "0",
		"offsets.topic.num.partitions":                        "3",
		"remote.log.storage.system.enable":                    "true",
		"remote.storage.backend":                              "fs",
		"remote.storage.fs.path":                              dir + "/objects",
	}
	cfg, err := broker.ParseConfig(broker.MergeProperties(props, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	n, err := broker.Open(broker.Options{Config: cfg, StartTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	if n.AdminAddr() == "" {
		t.Fatal("node has no admin listener")
	}
	return n
}

const (
	tieredTopic = "dash-tiered"
	groupID     = "dash-group"
)

// runLoad creates a tiered topic with small segments, produces for
// loadFor while a group consumer reads and commits, and causes one
// request-level error (a Heartbeat from an unknown member) and one
// partition-level error (a Fetch beyond the log end), so the error panels
// have series.
func runLoad(ctx context.Context, t *testing.T, n *broker.Node) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cfgs := map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes":         kadm.StringPtr("16384"),
		"local.retention.bytes": kadm.StringPtr("32768"),
	}
	resp, err := adm.CreateTopic(ctx, 3, 1, cfgs, tieredTopic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v / %v", err, resp.Err)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics(tieredTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(500*time.Millisecond), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	consumed := make(chan int, 1)
	var consumedSoFar atomic.Int64
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		total := 0
		for cctx.Err() == nil {
			fs := consumer.PollFetches(cctx)
			total += fs.NumRecords()
			consumedSoFar.Store(int64(total))
		}
		consumed <- total
	}()

	value := []byte(strings.Repeat("strata dashboards ", 28)) // ~500 bytes
	end := time.Now().Add(loadFor)
	produced := 0
	for time.Now().Before(end) && ctx.Err() == nil {
		var batch []*kgo.Record
		for i := 0; i < 50; i++ {
			batch = append(batch, &kgo.Record{Topic: tieredTopic, Key: []byte(fmt.Sprint(produced + i)), Value: value})
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		produced += len(batch)
		time.Sleep(20 * time.Millisecond) // the load's pace, not a synchronisation
	}
	// Let the consumer read everything, commit what it read, then stop it.
	waitFor(ctx, t, "the consumer to read what was produced", func() (bool, error) {
		return consumedSoFar.Load() >= int64(produced), nil
	})
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	ccancel()
	got := <-consumed
	if got == 0 {
		t.Fatalf("consumer read nothing of %d records", produced)
	}
	t.Logf("produced %d records, consumed %d", produced, got)

	// A request-level error: Heartbeat of a member the group does not know.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "dash-nobody", "nobody", 1
	hr, err := hb.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if hr.ErrorCode == 0 {
		t.Fatal("heartbeat of an unknown member answered without an error")
	}
	// A partition-level error: Fetch far beyond the log end.
	topics, err := adm.ListTopics(ctx, tieredTopic)
	if err != nil {
		t.Fatal(err)
	}
	fr := kmsg.NewPtrFetchRequest()
	fr.ReplicaID, fr.MaxWaitMillis, fr.MaxBytes = -1, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = tieredTopic, topics[tieredTopic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 1<<40, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	fres, err := fr.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(fres.Topics) != 1 || len(fres.Topics[0].Partitions) != 1 || fres.Topics[0].Partitions[0].ErrorCode == 0 {
		t.Fatalf("fetch beyond the log end answered without a partition error: %+v", fres.Topics)
	}
}

// checkRulesHealthy asks Prometheus for its rules: every rule of
// alerts.yml is loaded, evaluated, healthy and (on this node) inactive.
func checkRulesHealthy(ctx context.Context, t *testing.T, prom *promServer, want int) {
	t.Helper()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name           string `json:"name"`
					Health         string `json:"health"`
					LastError      string `json:"lastError"`
					State          string `json:"state"`
					LastEvaluation string `json:"lastEvaluation"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	waitFor(ctx, t, "every rule evaluated", func() (bool, error) {
		if err := prom.get(ctx, "/api/v1/rules", &body); err != nil {
			return false, err
		}
		n := 0
		for _, g := range body.Data.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return false, nil
				}
				n++
			}
		}
		return n == want, nil
	})
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			if r.LastError != "" || r.State != "inactive" {
				t.Errorf("rule %s/%s: health %s, state %s, last error %q", g.Name, r.Name, r.Health, r.State, r.LastError)
			}
		}
	}
}

// waitFor polls cond until it holds or ctx ends (the test's deadline).
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	timeout := testTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	testutil.Eventually(t, timeout, func() error {
		switch ok, err := cond(); {
		case ok:
			return nil
		case err != nil:
			return err
		}
		return errors.New("not yet")
	}, "%s", what)
}

func truncate(rs []json.RawMessage) string {
	var b strings.Builder
	for i, r := range rs {
		if i == 3 {
			fmt.Fprintf(&b, " … (%d series)", len(rs))
			break
		}
		b.Write(r)
		b.WriteByte(' ')
	}
	return b.String()
}

// runSecurityLoad gives the security panels series: one SASL PLAIN login
// that succeeds and one that fails, and a produce over a client-id quota
// of 1 KiB/s, which the broker answers throttled.
func runSecurityLoad(ctx context.Context, t *testing.T, n *broker.Node) {
	t.Helper()
	saslAddr := n.Addrs()["SASL_PLAINTEXT"]
	for _, pass := range []string{"dash-secret", "wrong"} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.RequestRetries(0),
			kgo.SASL(plain.Auth{User: "dash", Pass: pass}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		err = cl.Ping(pctx)
		pcancel()
		cl.Close()
		if (err == nil) != (pass == "dash-secret") {
			t.Fatalf("SASL PLAIN with password %q: %v", pass, err)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ClientID("dash-throttled"), kgo.DefaultProduceTopic(tieredTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	name := "dash-throttled"
	alts := []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}}
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, alts)
	if err != nil {
		t.Fatalf("alter client quotas: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter client quotas: %v (%s)", r.Err, r.ErrMessage)
		}
	}
	// Incompressible: the quota counts request bytes, and a client
	// compresses its batches.
	big := make([]byte, 12<<10) // under the tiered topic's 16 KiB segments
	cryptorand.Read(big)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); err != nil {
		t.Fatalf("produce over the quota: %v", err)
	}
}
