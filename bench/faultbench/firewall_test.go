package faultbench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-io/strata/internal/smalldisk"
)

func smalldiskMount(t *testing.T, mib int) (string, error) { return smalldisk.TryMount(t, mib) }

// firewall is a chain of iptables rules on lo's OUTPUT (every loopback
// packet passes it) that drops packets between node addresses; only
// 127.0.0.x addresses are ever named.
type firewall struct{ chain string }

func checkFirewall() error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("iptables not installed")
	}
	if out, err := exec.Command("iptables", "-w", "-S", "OUTPUT").CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -S: %v: %s (needs root)", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipt(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// chains numbers the firewalls of one test process (each run has its
// own chain, removed when its test ends).
var chains atomic.Int32

func newFirewall(t *testing.T) *firewall {
	fw := &firewall{chain: fmt.Sprintf("STRATA_FB_%d_%d", os.Getpid(), chains.Add(1))}
	ipt(t, "-N", fw.chain)
	ipt(t, "-I", "OUTPUT", "-o", "lo", "-j", fw.chain)
	t.Cleanup(func() {
		ipt(t, "-D", "OUTPUT", "-o", "lo", "-j", fw.chain)
		ipt(t, "-F", fw.chain)
		ipt(t, "-X", fw.chain)
	})
	return fw
}

// isolate drops every packet between ip and each of the others' addresses.
func (fw *firewall) isolate(t *testing.T, ip string, others []string) {
	for _, o := range others {
		ipt(t, "-A", fw.chain, "-s", ip, "-d", o, "-j", "DROP")
		ipt(t, "-A", fw.chain, "-s", o, "-d", ip, "-j", "DROP")
	}
}

func (fw *firewall) heal(t *testing.T) { ipt(t, "-F", fw.chain) }
