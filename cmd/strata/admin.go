package main

// The admin subcommands — topic, group, cluster, produce, consume — and the
// shell completion script. All their logic is in internal/admincli (a pure
// Kafka client); this file only registers them.

import (
	"io"
	"sort"

	"github.com/strata-io/strata/internal/admincli"
)

func init() {
	for _, name := range admincli.Commands {
		if name == "completion" {
			continue
		}
		addCommand(command{name: name, summary: admincli.Summary(name), run: func(args []string, stdout, stderr io.Writer) int {
			return admincli.Run(name, args, stdout, stderr)
		}})
	}
	addCommand(command{name: "completion", summary: admincli.Summary("completion"), run: func(args []string, stdout, stderr io.Writer) int {
		// Every registered subcommand (serve, loadgen, tier, ...) is
		// known by now: init functions have all run.
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		return admincli.Completion(args, stdout, stderr, names)
	}})
}
