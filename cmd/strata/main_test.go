package main

import (
	"bufio"
	"bytes"
	"context"
	"github.com/strata-io/strata/internal/testutil"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "strata")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("build strata: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestServeHelpListsSettings(t *testing.T) {
	out, err := exec.Command(binary, "serve", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"log.dirs", "default ./strata-data", "STRATA_LOG_DIRS", "socket.request.max.bytes", "auto.create.topics.enable"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestServeBadConfigExitsNonZero(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--set", "num.partitions=zero")
	cmd.Env = append(os.Environ(), "STRATA_LOG_DIRS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !bytes.Contains(out, []byte("num.partitions")) {
		t.Fatalf("err %v output %s", err, out)
	}
}

// TestServeRunsAndStopsCleanlyOnSIGTERM starts the binary on port 0 with
// its data dir from the environment, reads the bound address from its one
// line on stdout, produces through it, and stops it with SIGTERM: exit
// status 0 and the clean-shutdown marker written.
func TestServeRunsAndStopsCleanlyOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--set", "controller.quorum.voters=1@127.0.0.1:0",
		"--set", "admin.listener=127.0.0.1:0")
	cmd.Env = append(os.Environ(), "STRATA_LOG_DIRS="+dir)
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr.String())
		}
	}()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatal("no address line")
	}
	line := lines.Text()
	var addr, admin string
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "PLAINTEXT="); ok {
			addr = v
		}
		if v, ok := strings.CutPrefix(f, "ADMIN="); ok {
			admin = v
		}
	}
	if !strings.HasPrefix(line, "strata: listening ") || addr == "" || admin == "" {
		t.Fatalf("address line %q", line)
	}
	if resp, err := http.Get("http://" + admin + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz on the started binary: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// strata_build_info says which Strata runs, as `strata version` does.
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^strata_build_info\{commit="[^"]+",goversion="go[^"]+",version="[^"]+"\} 1$`).Match(metrics) {
		t.Errorf("/metrics has no strata_build_info{commit,goversion,version} 1")
	}
	if !strings.Contains(stderr.String(), "strata: starting") || !strings.Contains(stderr.String(), "version=") {
		t.Errorf("no start log line with the version:\n%s", stderr.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "proc", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "proc-0", "partition.metadata")); err != nil {
		t.Fatalf("no partition.metadata: %v", err)
	}
}
