package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// freePort returns a loopback port free right now, below the ephemeral
// range (freePortsOn).
func freePort(t *testing.T) string {
	t.Helper()
	return strconv.Itoa(freePortsOn(t, "127.0.0.1", 1)[0])
}

// TestEmptyMetadataKeepsDataAndTierRestoreAllBringsItBack runs the strata
// binary with a tiered topic, kills it, removes its metadata log
// (__cluster_metadata-0) and starts it again: the partition's directory
// is set aside as <dir>.<uuid>-stray with its segments (nothing deleted)
// and a warning names it; `strata tier list --brokers` (finding the admin
// listener through the cluster) shows the topic as lost; `strata tier
// restore --all` recreates it, and every record the bucket holds reads
// back at its offset.
func TestEmptyMetadataKeepsDataAndTierRestoreAllBringsItBack(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	data := t.TempDir()
	objects := filepath.Join(t.TempDir(), "objects")
	admin := "127.0.0.1:" + freePort(t)
	settings := []string{
		"remote.storage.fs.path=" + objects,
		"remote.log.manager.task.interval.ms=100",
		"log.retention.check.interval.ms=100",
		"log.segment.delete.delay.ms=0",
		"admin.listener=" + admin,
	}
	const topic = "keepme"
	p := startProcOn(t, data, 0, "127.0.0.1:0", settings...)
	createProcTopic(t, p.addr, topic, 1, map[string]*string{
		"segment.bytes":         kmsg.StringPtr("16384"),
		"remote.storage.enable": kmsg.StringPtr("true"),
		"local.retention.bytes": kmsg.StringPtr("16384"),
		"retention.ms":          kmsg.StringPtr("-1"),
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	all := map[[2]int64]string{}
	for i := range 150 {
		v := make([]byte, 1000)
		rand.Read(v)
		r := &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: v}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		all[[2]int64{0, r.Offset}] = string(v)
	}
	cl.Close()
	if err := testutil.Within(procWait, func() error {
		if segs, lag := tierTotals(t, admin, topic); segs == 0 || lag != 0 {
			return fmt.Errorf("not uploaded: %d remote segments, lag %d", segs, lag)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p.kill()
	if err := os.RemoveAll(filepath.Join(data, "__cluster_metadata-0")); err != nil {
		t.Fatal(err)
	}

	p = startProcOn(t, data, 1, "127.0.0.1:0", settings...)
	strays, _ := filepath.Glob(filepath.Join(data, topic+"-0.*-stray"))
	if len(strays) != 1 {
		t.Fatalf("stray dirs %v, want one %s-0.<uuid>-stray", strays, topic)
	}
	if logs, _ := filepath.Glob(filepath.Join(strays[0], "*.log")); len(logs) == 0 {
		t.Fatalf("%s holds no segment", strays[0])
	}
	stderr, _ := os.ReadFile(p.err)
	stdout, _ := os.ReadFile(p.out)
	if logs := string(stderr) + string(stdout); !strings.Contains(logs, "stray log set aside") || strings.Contains(logs, "removing stray log") {
		t.Fatalf("no stray warning in the logs:\n%s", logs)
	}

	var out, errb strings.Builder
	if code := run([]string{"tier", "list", "--brokers", p.addr, "--format", "json"}, &out, &errb); code != 0 {
		t.Fatalf("tier list --brokers: exit %d: %s", code, errb.String())
	}
	var rows []bucketTopic
	if err := json.Unmarshal([]byte(out.String()), &rows); err != nil || len(rows) != 1 || rows[0].Topic != topic || rows[0].State != "lost" || len(rows[0].Partitions) != 1 {
		t.Fatalf("tier list: %v\n%s", err, out.String())
	}
	remoteEnd := rows[0].Partitions[0].EndOffset
	out.Reset()
	errb.Reset()
	if code := run([]string{"tier", "restore", "--all", "--brokers", p.addr}, &out, &errb); code != 0 || !strings.Contains(out.String(), `restored created topic "`+topic+`"`) {
		t.Fatalf("tier restore --all: exit %d\n%s%s", code, out.String(), errb.String())
	}
	restored := map[[2]int64]string{}
	for k, v := range all {
		if k[1] <= remoteEnd {
			restored[k] = v
		}
	}
	if len(restored) == 0 {
		t.Fatal("nothing of the topic was in the bucket")
	}
	checkLog(t, p.addr, topic, 1, restored)
	t.Logf("restored %d of %d records (offsets up to %d) from the bucket; the rest is in %s", len(restored), len(all), remoteEnd, filepath.Base(strays[0]))
}

// TestTierBrokersFindsTheAdminListenerOrSaysWhy: `strata tier status
// --brokers` reaches the admin listener the cluster reports
// (admin.listener from DescribeConfigs); with admin.listener on port 0 it
// fails with one line saying to give --admin; with an unreachable seed it
// says it cannot reach the brokers.
func TestTierBrokersFindsTheAdminListenerOrSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	admin := "127.0.0.1:" + freePort(t)
	p := startProcOn(t, t.TempDir(), 0, "127.0.0.1:0", "admin.listener="+admin)
	createProcTopic(t, p.addr, "viabrokers", 1, map[string]*string{"remote.storage.enable": kmsg.StringPtr("true")})
	if err := testutil.Within(procWait, func() error {
		var out, errb strings.Builder
		code := run([]string{"tier", "status", "--brokers", p.addr}, &out, &errb)
		if code == 0 && strings.Contains(out.String(), "viabrokers") {
			return nil
		}
		return fmt.Errorf("tier status --brokers: exit %d\n%s%s", code, out.String(), errb.String())
	}); err != nil {
		t.Fatal(err)
	}

	q := startProc(t, t.TempDir(), 0) // admin.listener=127.0.0.1:0
	var out, errb strings.Builder
	if code := run([]string{"tier", "status", "--brokers", q.addr}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "give --admin") || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("admin listener on port 0: exit %d %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"tier", "status", "--brokers", "127.0.0.1:1", "--timeout", "5s"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "cannot reach brokers") {
		t.Fatalf("unreachable seed: exit %d %q", code, errb.String())
	}
}
