package main

// strata format: the node's bootstrap, as Kafka's `kafka-storage format
// --add-scram` (KIP-900). It writes the SCRAM credentials a new cluster
// starts with into <metadata.log.dir>/bootstrap.records (broker/bootstrap.go:
// salt and derived keys only, never a password); the cluster's first
// controller leader commits them with the cluster id. Run it on every
// controller node before its first `strata serve` (any of them may lead
// first), with the same credentials; a node that has started is refused.

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/controller/metadata"
)

func init() {
	addCommand(command{name: "format", summary: "bootstrap a new node's metadata: SCRAM users (--add-scram, as kafka-storage format)", run: formatCmd})
}

const formatUsage = `usage: strata format [--config server.properties] [--set name=value]... --add-scram SPEC... | --add-scram-file FILE

Writes the SCRAM credentials a new cluster starts with to
<metadata.log.dir>/bootstrap.records; the first controller leader commits them
when the quorum forms. Run it on each controller node before its first start.

  --add-scram SPEC       Kafka's syntax, repeatable:
                           'SCRAM-SHA-256=[name=alice,password=alice-secret]'
                           'SCRAM-SHA-512=[name=alice,iterations=8192,salt="<base64>",saltedpassword="<base64>"]'
                         (iterations 4096..16384, default 4096; salt default random)
  --add-scram-file FILE  one SPEC a line ('#' comments), "-" for stdin: keeps
                         passwords out of the command line
  --config, --set        the node's settings, as for strata serve (log.dirs,
                         metadata.log.dir)
`

func formatCmd(args []string, stdout, stderr io.Writer) int {
	return formatRun(args, os.Stdin, stdout, stderr)
}

func formatRun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("format", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "Kafka-style properties file")
	sets := setFlags{}
	fs.Var(sets, "set", "name=value, overrides file and environment (repeatable)")
	var specs multiFlag
	fs.Var(&specs, "add-scram", "SCRAM credential in Kafka's syntax (repeatable)")
	specFile := fs.String("add-scram-file", "", "file of --add-scram specs, one a line; - for stdin")
	fs.Usage = func() { fmt.Fprint(stderr, formatUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata format: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *specFile != "" {
		var r io.Reader = stdin
		if *specFile != "-" {
			f, err := os.Open(*specFile)
			if err != nil {
				fmt.Fprintf(stderr, "strata format: %v\n", err)
				return 1
			}
			defer f.Close()
			r = f
		}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
				specs = append(specs, line)
			}
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(stderr, "strata format: %s: %v\n", *specFile, err)
			return 1
		}
	}
	if len(specs) == 0 {
		fmt.Fprint(stderr, "strata format: nothing to bootstrap (give --add-scram or --add-scram-file)\n\n"+formatUsage)
		return 2
	}
	var recs []metadata.Record
	seen := map[string]bool{}
	var names []string
	for _, s := range specs {
		r, err := broker.ParseAddScram(s, nil)
		if err != nil {
			fmt.Fprintf(stderr, "strata format: %v\n", err)
			return 2
		}
		key := r.Name + " " + r.Mechanism.String()
		if seen[key] {
			fmt.Fprintf(stderr, "strata format: %s given twice\n", key)
			return 2
		}
		seen[key] = true
		names = append(names, key)
		recs = append(recs, r)
	}

	var file map[string]string
	if *configPath != "" {
		f, err := os.Open(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "strata format: %v\n", err)
			return 1
		}
		file, err = broker.ReadProperties(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "strata format: %s: %v\n", *configPath, err)
			return 1
		}
	}
	cfg, err := broker.LoadConfig(broker.ConfigSources{File: file, FileName: *configPath, Env: os.Environ(), Flags: sets})
	if err != nil {
		fmt.Fprintf(stderr, "strata format: %v\n", err)
		return 1
	}
	path, err := broker.FormatBootstrap(nil, cfg, recs)
	if err != nil {
		fmt.Fprintf(stderr, "strata format: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "strata format: wrote %d SCRAM credential(s) (%s) to %s\n", len(recs), strings.Join(names, ", "), path)
	return 0
}
