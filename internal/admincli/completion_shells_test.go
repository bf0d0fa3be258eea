package admincli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needShell finds a shell the completion tests run. Missing, the test
// skips on a newcomer's machine and fails in CI (.ci/run installs it).
func needShell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (CI=true: .ci/run installs it)", name)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

func completionScript(t *testing.T, sh string) string {
	t.Helper()
	var out, errb strings.Builder
	if code := Completion([]string{sh}, &out, &errb, []string{"serve", "loadgen", "tier"}); code != ExitOK {
		t.Fatalf("%s: exit %d: %s", sh, code, errb.String())
	}
	f := filepath.Join(t.TempDir(), "strata."+sh)
	if err := os.WriteFile(f, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// The cases every shell's completion must get right: a partial word
// completed to the one action it names, and an action's flag.
var completionCases = []struct{ line, want string }{
	{"strata topic cr", "strata topic create"},
	{"strata group reset-offsets g --to-l", "strata group reset-offsets g --to-latest"},
	{"strata cluster i", "strata cluster info"},
}

// TestCompletionZshInteractive sources the zsh script into a real
// interactive zsh (driven through zsh's own pseudo-terminal module,
// zpty), types each case and a TAB, and reads back the line zsh's
// completion system made of it. This is the path a user's shell takes
// (compinit, bashcompinit and its 0-based COMP_WORDS), not a simulation.
func TestCompletionZshInteractive(t *testing.T) {
	zsh := needShell(t, "zsh")
	script := completionScript(t, "zsh")
	home := t.TempDir()
	for _, c := range completionCases {
		// The source line echoes SOUR"CED", so only its output (not the
		// echo of the typed line) matches *SOURCED*: the driver waits for
		// compinit to finish before it types the case and the TAB.
		driver := `zmodload zsh/zpty || exit 3
zpty -b z 'zsh -f -i' || exit 4
zpty -w z 'PS1="%% "; source ` + script + ` 2>&1; echo SOUR"CED"'
zpty -r z out '*SOURCED*' || exit 5
zpty -wn z $'` + c.line + `\t'
screen=
for i in {1..40}; do
  sleep 0.25
  while zpty -r -t z chunk; do screen+=$chunk; done
  [[ $screen == *"$WANT "* ]] && break
done
zpty -wn z $'\x15'
zpty -w z 'exit'
zpty -d z
print -r -- "$out$screen"
`
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, zsh, "-f", "-c", driver)
		cmd.Env = append(os.Environ(), "HOME="+home, "ZDOTDIR="+home, "TERM=dumb", "WANT="+c.want)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%q: zsh driver: %v\n%s", c.line, err, out)
		}
		screen := string(out)
		if !strings.Contains(screen, "SOURCED") {
			t.Fatalf("%q: the script did not source:\n%q", c.line, screen)
		}
		if !strings.Contains(screen, c.want+" ") {
			t.Errorf("%q + TAB in zsh: want %q on the line, screen:\n%q", c.line, c.want, screen)
		}
	}
}

// TestCompletionFish loads the fish script into fish and asks fish's own
// completion engine (complete -C) what it offers for each case.
func TestCompletionFish(t *testing.T) {
	fish := needShell(t, "fish")
	script := completionScript(t, "fish")
	home := t.TempDir()
	for _, c := range append(completionCases, struct{ line, want string }{"strata ", "strata topic"}) {
		prefix, last := c.line, ""
		if i := strings.LastIndexByte(c.line, ' '); i >= 0 {
			prefix, last = c.line[:i+1], c.line[i+1:]
		}
		want := strings.TrimPrefix(c.want, prefix)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, fish, "--no-config", "-c", "source "+script+"; complete -C'"+c.line+"'")
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%q: fish: %v\n%s", c.line, err, out)
		}
		var got []string
		for _, l := range lines(string(out)) {
			cand, _, _ := strings.Cut(l, "\t") // fish prints a description after a tab
			got = append(got, cand)
			if !strings.HasPrefix(cand, last) {
				t.Errorf("%q: fish offers %q, which does not extend %q", c.line, cand, last)
			}
		}
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("%q: fish offers %q, want %q among them", c.line, got, want)
		}
	}
}
