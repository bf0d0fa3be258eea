package faultbench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/deliverycheck"
)

// TestRowSaysWhyACellHasNoFigure: a cell without timings says why (no
// election needed, the ISR never shrank, a fault not run), never blank;
// one that should have a figure and has none fails Clean.
func TestRowSaysWhyACellHasNoFigure(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		r     Result
		row   string
		clean bool
	}{
		{Result{FaultResult: deliverycheck.FaultResult{Fault: "kill", Runs: 3, Acked: 900, Reelection: []time.Duration{2 * s, 3 * s, 11 * s}, ISRRecovery: []time.Duration{s}}, ExpectElection: true, ISRShrinks: 3},
			"| kill | 3 | 900 | 0 | 0 | 0 | 0 | 0 / 0 | 3s / 11s (3) | 1s / 1s (1) |", true},
		{Result{FaultResult: deliverycheck.FaultResult{Fault: "disk", Runs: 1, Acked: 5}, Failed: 2, Unknown: 1},
			"| disk | 1 | 5 | 0 | 0 | 0 | 0 | 2 / 1 | none needed (leaders kept) | never shrank |", true},
		{Result{FaultResult: deliverycheck.FaultResult{Fault: "store", Runs: 1}, LeaderChanges: 2, ISRShrinks: 1},
			"| store | 1 | 0 | 0 | 0 | 0 | 0 | 0 / 0 | 2 leader changes | did not recover |", true},
		{Result{FaultResult: deliverycheck.FaultResult{Fault: "stop", Runs: 2, Reelection: []time.Duration{s}}, ExpectElection: true, NoVerdict: 1},
			"| stop | 2 (1 without a verdict) | 0 | 0 | 0 | 0 | 0 | 0 / 0 | 1s / 1s (1) | never shrank |", false},
		{Result{FaultResult: deliverycheck.FaultResult{Fault: "lossy", Runs: 1, Lost: 1}},
			"| lossy | 1 | 0 | 1 | 0 | 0 | 0 | 0 / 0 | none needed (leaders kept) | never shrank |", false},
		{Result{FaultResult: deliverycheck.FaultResult{Fault: "cut"}, Skipped: "iptables not installed"},
			"| cut | not run: iptables not installed | | | | | | | | |", true},
	} {
		if got := c.r.Row(); got != c.row {
			t.Errorf("row\n got %s\nwant %s", got, c.row)
		}
		if got := c.r.Clean(); got != c.clean {
			t.Errorf("%s: Clean %v, want %v", c.r.Fault, got, c.clean)
		}
	}
	var b bytes.Buffer
	p := &Page{Commit: "abc", Results: []*Result{{FaultResult: deliverycheck.FaultResult{Fault: "kill"}, Notes: []string{"restarted"}}},
		Description: map[string]string{"kill": "SIGKILL"}}
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{Header(), "| kill | 0 |", "- **kill**: SIGKILL\n  - restarted", "Commit: `abc`"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q:\n%s", want, b.String())
		}
	}
}
