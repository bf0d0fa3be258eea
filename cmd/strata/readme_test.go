package main

import (
	"bufio"
	"context"
	"flag"
	"github.com/strata-io/strata/internal/testutil"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the README's settings table from broker.Settings")

const (
	settingsBegin = "<!-- settings:begin (generated from `strata serve --help`: go test ./cmd/strata -run TestReadmeSettings -update-readme) -->"
	settingsEnd   = "<!-- settings:end -->"
)

// settingsTable renders broker.Settings — the table `strata serve --help`
// prints — as the README's markdown table.
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| setting | default | environment | what it does |\n| --- | --- | --- | --- |\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, s := range broker.Settings {
		def := "`" + s.Default + "`"
		if s.Default == "" {
			def = "(unset)"
		}
		b.WriteString("| `" + s.Name + "` | " + esc(def) + " | `" + broker.EnvName(s.Name) + "` | " + esc(s.Doc) + " |\n")
	}
	return b.String()
}

// TestReadmeSettingsTableMatchesHelp keeps the README's settings table true
// to `strata serve --help`: both come from broker.Settings, and this test
// fails when the README's copy drifts.
func TestReadmeSettingsTableMatchesHelp(t *testing.T) {
	const path = "../../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i, j := strings.Index(text, settingsBegin), strings.Index(text, settingsEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no settings table between %q and %q", settingsBegin, settingsEnd)
	}
	got := strings.TrimSpace(text[i+len(settingsBegin) : j])
	want := strings.TrimSpace(settingsTable())
	if got == want {
		return
	}
	if *updateReadme {
		text = text[:i+len(settingsBegin)] + "\n" + want + "\n" + text[j:]
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's settings table differs from `strata serve --help`; run\n\tgo test ./cmd/strata -run TestReadmeSettings -update-readme\nwant:\n%s", want)
}

// tryItLines returns the commands of the README's "Try it" section: its
// indented lines, in order.
func tryItLines(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "\n## Try it\n")
	if i < 0 {
		t.Fatal(`README.md has no "## Try it" section`)
	}
	section := text[i+len("\n## Try it\n"):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var out []string
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "    ") && strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// TestReadmeTryIt runs the README's "Try it" walkthrough, line by line, as
// bash would, against a freshly started node: every line must succeed.
// The node listens on free ports; 127.0.0.1:9092 in a line becomes its
// address and 127.0.0.1:9644 its admin listener, and STRATA_BROKERS/
// STRATA_ADMIN point the CLI at it. `go build`
// is the binary TestMain built from this source; loadgen runs are shortened
// (--duration 1s --warmup 0s, the later flag winning). kcat lines need kcat
// (.ci/run installs it).
func TestReadmeTryIt(t *testing.T) {
	lines := tryItLines(t)
	if len(lines) < 5 {
		t.Fatalf("Try it has %d command lines", len(lines))
	}
	kcat, kcatErr := exec.LookPath("kcat")
	if kcatErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat missing under CI (.ci/run installs it): %v", kcatErr)
		}
		t.Logf("kcat not available: skipping the kcat lines (%v)", kcatErr)
	}
	addr, admin := startNode(t)
	dir := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(dir, "strata")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "STRATA_BROKERS="+addr, "STRATA_ADMIN="+admin)
	start := time.Now()
	for _, line := range lines {
		cmdline := strings.ReplaceAll(line, "127.0.0.1:9092", addr)
		cmdline = strings.ReplaceAll(cmdline, "127.0.0.1:9644", admin)
		switch {
		case strings.HasPrefix(line, "go build ./cmd/strata"):
			continue // TestMain built ./strata from this source
		case strings.HasPrefix(line, "kcat ") || strings.Contains(line, "| kcat "):
			if kcatErr != nil {
				continue
			}
			cmdline = strings.ReplaceAll(cmdline, "kcat ", kcat+" ")
		case strings.HasPrefix(line, "./strata loadgen verify"):
			cmdline += " --duration 1s --quiet" // a verdict: exit 0 only when clean
		case strings.HasPrefix(line, "./strata loadgen ") && !strings.HasPrefix(line, "./strata loadgen compare"):
			cmdline += " --duration 1s --warmup 0s --quiet"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", cmdline)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("README Try it line failed:\n\t%s\n%v\n%s", line, err, out)
		}
		switch {
		case strings.HasPrefix(line, "./strata consume orders"):
			if !strings.Contains(string(out), "k1=hello") || !strings.Contains(string(out), "k2=world") {
				t.Errorf("%s: printed %s", line, out)
			}
		case strings.HasPrefix(line, "./strata group describe my-group"):
			if !strings.Contains(string(out), "my-group") || !strings.Contains(string(out), "orders") {
				t.Errorf("%s: printed %s", line, out)
			}
		}
	}
	t.Logf("README Try it: %d lines in %v", len(lines), time.Since(start).Round(time.Millisecond))
}

// startNode starts `strata serve` on free ports with its data in a temp dir
// and returns its PLAINTEXT and admin addresses; the node is stopped with
// SIGTERM at cleanup.
func startNode(t *testing.T) (addr, admin string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--set", "controller.quorum.voters=1@127.0.0.1:0",
		"--set", "admin.listener=127.0.0.1:0")
	cmd.Env = append(os.Environ(), "STRATA_LOG_DIRS="+t.TempDir())
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cancel()
			<-done
		}
		cancel()
		if t.Failed() {
			t.Logf("node stderr:\n%s", stderr.String())
		}
	})
	lineCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lineCh <- sc.Text()
		}
		close(lineCh)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lineCh:
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "PLAINTEXT="); ok {
				addr = v
			}
			if v, ok := strings.CutPrefix(f, "ADMIN="); ok {
				admin = v
			}
		}
	case <-time.After(30 * time.Second):
	}
	if addr == "" || admin == "" {
		t.Fatalf("node did not print its addresses:\n%s", stderr.String())
	}
	return addr, admin
}
