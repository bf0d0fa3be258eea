package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveOnce runs `strata serve args...` on free ports with its data in a
// temp dir, env added, and returns its exit code and output. A serve that
// starts instead of failing is killed at the deadline and fails the test.
func serveOnce(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := []string{"serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--set", "controller.quorum.voters=1@127.0.0.1:0",
		"--set", "admin.listener=127.0.0.1:0"}
	cmd := exec.CommandContext(ctx, binary, append(base, args...)...)
	cmd.Env = append(append(os.Environ(), "STRATA_LOG_DIRS="+t.TempDir()), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("serve %v did not exit (it started?):\n%s", args, out.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// TestServeRefusesUnknownSettings: a misspelt name from --set, the
// environment or the properties file stops the start, naming the closest
// setting, instead of logging "unknown setting ignored" and running.
func TestServeRefusesUnknownSettings(t *testing.T) {
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("log.retention.hour=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--set", "log.segment.byte=100000"}, "did you mean log.segment.bytes?"},
		{[]string{"STRATA_LOG_SEGMENT_BYTEZ=100000"}, nil, "did you mean STRATA_LOG_SEGMENT_BYTES"},
		{nil, []string{"--config", props}, props + ": unknown setting log.retention.hour; did you mean log.retention.hours?"},
	} {
		code, out := serveOnce(t, tc.env, tc.args...)
		if code != 1 || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("env %v args %v: exit %d, want 1 and one line with %q:\n%s", tc.env, tc.args, code, tc.want, out)
		}
	}
}

// TestServeFlagErrorIsOneLine: a malformed flag prints its error and a
// pointer to --help, not the whole settings table.
func TestServeFlagErrorIsOneLine(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--set", "novalue"}, {"stray"}} {
		out, err := exec.Command(binary, append([]string{"serve"}, args...)...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit 2", args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) > 2 || !strings.Contains(string(out), "strata serve --help") || strings.Contains(string(out), "log.dirs") {
			t.Errorf("%v: want one error line and a pointer to --help, got %d lines:\n%s", args, len(lines), out)
		}
	}
}

// TestServeBindErrorNamesSetting: a port in use fails the start with the
// setting that holds the address.
func TestServeBindErrorNamesSetting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	for _, tc := range []struct{ set, want string }{
		{"admin.listener=" + busy, "admin.listener: listen " + busy},
		{"listeners=PLAINTEXT://" + busy + ",CONTROLLER://127.0.0.1:0", "listeners: listen PLAINTEXT://" + busy},
		{"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://" + busy, "listeners: listen CONTROLLER://" + busy},
	} {
		code, out := serveOnce(t, nil, "--set", tc.set)
		if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(out, "address already in use") {
			t.Errorf("--set %s: exit %d, want 1 and %q:\n%s", tc.set, code, tc.want, out)
		}
	}
}

// TestVersionCommand: `strata version` and `strata --version` print the
// version and commit.
func TestVersionCommand(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(binary, arg).Output()
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if s := string(out); !strings.HasPrefix(s, "strata ") || !strings.Contains(s, "(commit ") || !strings.Contains(s, "go1.") {
			t.Errorf("%s: %q", arg, s)
		}
	}
}

func TestServeHelpListsIgnoredKafkaSettings(t *testing.T) {
	out, err := exec.Command(binary, "serve", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(out, []byte("not implemented"))
	if i < 0 {
		t.Fatalf("help has no list of ignored Kafka settings:\n%s", out)
	}
	for _, want := range []string{"num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "zookeeper.connect"} {
		if !bytes.Contains(out[i:], []byte(want)) {
			t.Errorf("ignored list lacks %q", want)
		}
	}
}
