// Command strata is the Strata broker binary. Subcommands, each in its own
// file registered with addCommand:
//
//	strata serve [--config server.properties] [--set name=value]...
//	strata topic|group|cluster|produce|consume|completion ...  (admin.go → internal/admincli)
//	strata loadgen run|max-throughput|...|compare|machine|kfake (loadgen.go → loadgen)
//	strata tier status|restore                                 (tier.go: the admin HTTP listener)
//	strata version | strata --version                          (internal/buildinfo)
//
// serve starts a node (broker and, by default, controller) and runs until
// SIGINT or SIGTERM. Configuration precedence: --set, then STRATA_*
// environment variables, then the properties file, then defaults; `strata
// serve --help` lists every setting. On start it prints one line with the
// bound addresses:
//
//	strata: listening ADMIN=127.0.0.1:9644 CONTROLLER=127.0.0.1:9093 PLAINTEXT=127.0.0.1:9092
//
// ADMIN is the admin HTTP listener (admin.listener): /metrics, /healthz,
// /readyz, /debug/pprof/.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/buildinfo"
)

// serveHelp is `strata serve --help`: the flags, then every setting, then
// the Kafka settings accepted and ignored.
func serveHelp(w io.Writer) {
	fmt.Fprintln(w, "usage: strata serve [--config server.properties] [--set name=value]...")
	fmt.Fprintln(w, "\nprecedence: --set > STRATA_* environment > --config file > default")
	fmt.Fprintln(w, "A name that is neither a setting below nor an ignored Kafka setting is an error.\n\nsettings:")
	broker.Help(w)
	fmt.Fprintln(w, "\nKafka settings accepted but not implemented (a warning at start, no effect):")
	broker.HelpIgnored(w)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand of the binary. Each lives in its own file and
// adds itself to commands from an init function, so subcommands never edit
// one another's code.
type command struct {
	name    string
	summary string // one line for the usage text
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func addCommand(c command) {
	if _, dup := commands[c.name]; dup {
		panic("strata: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func init() {
	addCommand(command{name: "serve", summary: "run a broker (and controller) node", run: serve})
	addCommand(command{name: "version", summary: "print the version and commit of this binary", run: version})
}

// version prints buildinfo.String(): "strata dev (commit 57a89cd0b1c2,
// go1.26.8)". `strata --version` says the same.
func version(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "strata version: takes no arguments\n")
		return 2
	}
	fmt.Fprintln(stdout, buildinfo.String())
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: strata <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'strata <command> --help' for a command's flags.")
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	case "-version", "--version":
		return version(args[1:], stdout, stderr)
	}
	if c, ok := commands[args[0]]; ok {
		return c.run(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "strata: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// setFlags collects repeated --set name=value.
type setFlags map[string]string

func (s setFlags) String() string { return "" }

func (s setFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	s[strings.TrimSpace(k)] = strings.TrimSpace(val)
	return nil
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "Kafka-style properties file")
	sets := setFlags{}
	fs.Var(sets, "set", "name=value, overrides file and environment (repeatable)")
	// The flag package prints a parse error's one line itself; the whole
	// settings table is for --help only.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			serveHelp(stdout)
			return 0
		}
		fmt.Fprintln(stderr, "Run 'strata serve --help' for every flag and setting.")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata serve: unexpected argument %q (settings are --set name=value)\n", fs.Arg(0))
		fmt.Fprintln(stderr, "Run 'strata serve --help' for every flag and setting.")
		return 2
	}
	var file map[string]string
	if *configPath != "" {
		f, err := os.Open(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "strata: %v\n", err)
			return 1
		}
		file, err = broker.ReadProperties(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "strata: %s: %v\n", *configPath, err)
			return 1
		}
	}
	cfg, err := broker.LoadConfig(broker.ConfigSources{File: file, FileName: *configPath, Env: os.Environ(), Flags: sets})
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return 1
	}
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(stderr, opts)
	}
	logger := slog.New(h)
	slog.SetDefault(logger)
	logger.Info("strata: starting", "version", buildinfo.Version(), "commit", buildinfo.Commit(), "go", buildinfo.GoVersion())
	for _, k := range cfg.Ignored {
		logger.Warn("strata: Kafka setting not implemented by Strata, ignored", "name", k)
	}

	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)

	node, err := broker.Open(broker.Options{Config: cfg, Logger: logger})
	if err != nil {
		logger.Error("strata: start failed", "err", err)
		return 1
	}
	addrs := node.Addrs()
	names := make([]string, 0, len(addrs))
	for k := range addrs {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + "=" + addrs[k]
	}
	fmt.Fprintf(stdout, "strata: listening %s\n", strings.Join(parts, " "))

	code := 0
	select {
	case sig := <-sigc:
		logger.Info("strata: shutting down", "signal", sig.String())
	case <-node.Done():
		logger.Error("strata: node stopped on a failure")
		code = 1
	}
	if err := node.Close(); err != nil {
		logger.Error("strata: shutdown", "err", err)
		return 1
	}
	logger.Info("strata: stopped cleanly")
	return code
}
