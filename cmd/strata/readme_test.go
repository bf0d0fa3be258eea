package main

import (
	"flag"
	"os"
	"strings"
	"testing"

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
