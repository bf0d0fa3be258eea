package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/smalldisk"
	"github.com/strata-io/strata/internal/testutil"
)

// A second `strata serve` on a data directory a live broker uses, with
// ports of its own, is refused at once with one line naming the holder's
// pid; the first broker goes on serving.
func TestSecondServeOnSameDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, dir, 1)
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--set", "controller.quorum.voters=1@127.0.0.1:0",
		"--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("second serve on the same dir: %v, want a non-zero exit\n%s", err, out)
	}
	pid := fmt.Sprintf("pid=%d", p.cmd.Process.Pid)
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "in use by another process") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, pid) || !strings.Contains(line, filepath.Clean(dir)) {
		t.Fatalf("no one-line error naming %s and %s:\n%s", dir, pid, out)
	}
	if strings.Contains(string(out), "storage: loaded") || strings.Contains(string(out), "broker: started") {
		t.Fatalf("the second process got as far as loading:\n%s", out)
	}
	// The first is unaffected: it takes and serves records.
	createProcTopic(t, p.addr, "still-here", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("still-here"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).First()
	if err != nil {
		t.Fatalf("produce to the first broker: %v", err)
	}
	checkLog(t, p.addr, "still-here", 1, map[[2]int64]string{{0, r.Offset}: "v"})
}

// A full disk (a small tmpfs, filled by a file beside the broker's data):
// appends are refused with KAFKA_STORAGE_ERROR while reads go on, a
// restart on the full disk starts (it crashed with SIGBUS rebuilding an
// index), and once the file is removed appends resume by themselves; every
// acknowledged record is there.
func TestFullDiskRefusesAppendsKeepsReadsAndResumes(t *testing.T) {
	disk := smalldisk.Mount(t, 48)
	data := filepath.Join(disk, "data")
	// The metadata log lives elsewhere: a full metadata disk is the
	// controller's matter, not this test's.
	settings := []string{"strata.log.dir.min.free.bytes=4194304", "metadata.log.dir=" + t.TempDir(),
		"log.segment.bytes=1048576", "remote.log.storage.system.enable=false"}
	p := startProcOn(t, data, 1, "127.0.0.1:0", settings...)
	const topic = "full"
	createProcTopic(t, p.addr, topic, 2, nil)

	all := map[[2]int64]string{}
	// franz-go retries KAFKA_STORAGE_ERROR (retriable) until the delivery
	// timeout, so the code the broker answered is read from its log.
	var clientLog testutil.SyncBuffer
	produce := func(addr, tag string, n int) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
			kgo.RecordDeliveryTimeout(3*time.Second), kgo.WithLogger(kgo.BasicLogger(&clientLog, kgo.LogLevelDebug, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), procWait)
		defer cancel()
		for i := range n {
			v := fmt.Sprintf("%s-%d-%s", tag, i, strings.Repeat("x", 1000))
			r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).First()
			if err != nil {
				return err
			}
			all[[2]int64{int64(r.Partition), r.Offset}] = v
		}
		return nil
	}
	if err := produce(p.addr, "before", 500); err != nil {
		t.Fatalf("produce before the disk filled: %v", err)
	}
	filler := filepath.Join(disk, "filler")
	smalldisk.Fill(t, filler)

	refused := func(addr string) {
		t.Helper()
		if err := testutil.Within(procWait, func() error {
			clientLog.Reset()
			err := produce(addr, "full", 1)
			if err != nil && (errors.Is(err, kerr.KafkaStorageError) || strings.Contains(clientLog.String(), kerr.KafkaStorageError.Message)) {
				return nil
			}
			return fmt.Errorf("produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
		}); err != nil {
			t.Fatal(err)
		}
	}
	refused(p.addr)
	checkLog(t, p.addr, topic, 2, all) // reads go on

	// Restart on the full disk, uncleanly.
	p.kill()
	p = startProcOn(t, data, 2, "127.0.0.1:0", settings...)
	refused(p.addr)
	checkLog(t, p.addr, topic, 2, all)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(procWait, func() error {
		if err := produce(p.addr, "after", 1); err != nil {
			return fmt.Errorf("appends did not resume once space was freed: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := produce(p.addr, "after2", 100); err != nil {
		t.Fatalf("produce after space was freed: %v", err)
	}
	checkLog(t, p.addr, topic, 2, all)
}
