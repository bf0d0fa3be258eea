package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/testutil"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFormatAddScramBootstrapsTheFirstUser: `strata format --add-scram`
// (Kafka's syntax) and --add-scram-file on stdin, then `strata serve` with
// the authorizer on: the new cluster has the credentials without any API
// call (DescribeUserScramCredentials through a super user shows them with
// their iterations); the bootstrap file holds no password; a second format
// of the started node is refused.
func TestFormatAddScramBootstrapsTheFirstUser(t *testing.T) {
	dir := t.TempDir()
	run := func(stdin string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"format"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	code, out := run("# users\nSCRAM-SHA-512=[name=bob,password=\"bob,secret\",iterations=16384]\n",
		"--set", "log.dirs="+dir,
		"--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
		"--add-scram", `SCRAM-SHA-512=[name=alice,iterations=8192,password=alice-secret]`,
		"--add-scram-file", "-")
	if code != 0 || !strings.Contains(out, "wrote 3 SCRAM credential(s)") {
		t.Fatalf("format: exit %d: %s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "bootstrap.records"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("alice-secret")) || bytes.Contains(b, []byte("bob,secret")) {
		t.Fatal("the bootstrap file holds a password")
	}
	if code, out := run("", "--set", "log.dirs="+dir, "--add-scram", "SCRAM-SHA-1=[name=x,password=hunter2]"); code != 2 || strings.Contains(out, "hunter2") {
		t.Fatalf("bad spec: exit %d: %s", code, out)
	}

	p := startProcOn(t, dir, 0, "127.0.0.1:0", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS")
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	var desc kadm.DescribedUserSCRAMs
	testutil.Eventually(t, procWait, func() bool {
		desc, err = kadm.NewClient(cl).DescribeUserSCRAMs(ctx)
		return err == nil && len(desc) == 2
	}, "describe the bootstrapped users")
	a, bob := desc["alice"], desc["bob"]
	if len(a.CredInfos) != 2 || a.CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 4096}) ||
		a.CredInfos[1] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 8192}) ||
		len(bob.CredInfos) != 1 || bob.CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 16384}) {
		t.Fatalf("bootstrapped credentials: %+v", desc)
	}
	p.kill()
	if code, out := run("", "--set", "log.dirs="+dir, "--add-scram", "SCRAM-SHA-256=[name=carol,password=c]"); code != 1 || !strings.Contains(out, "already started") {
		t.Fatalf("format of a started node: exit %d: %s", code, out)
	}
}
