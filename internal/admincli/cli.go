package admincli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/clientsec"
)

// Exit codes of [Run].
const (
	ExitOK    = 0 // the operation succeeded
	ExitFail  = 1 // the operation (or part of it) failed
	ExitUsage = 2 // bad command line: unknown action, bad flag value, missing argument
)

// DefaultBrokers is where the commands connect when neither --brokers nor
// $STRATA_BROKERS says otherwise (the default PLAINTEXT listener of
// `strata serve`).
const DefaultBrokers = "127.0.0.1:9092"

// Commands lists the subcommands [Run] accepts, in the order usage shows.
var Commands = []string{"topic", "group", "cluster", "txn", "acl", "user", "quota", "produce", "consume", "completion"}

// Summary returns a subcommand's one-line description ("" if unknown).
func Summary(cmd string) string {
	if c, ok := commandTable()[cmd]; ok {
		return c.summary
	}
	return ""
}

// Run runs one subcommand (cmd is "topic", "group", "cluster", "txn", "produce",
// "consume" or "completion"; args are what follows it on the command line)
// and returns its exit code: [ExitOK], [ExitFail] or [ExitUsage]. produce
// reads os.Stdin; see [RunStdin].
func Run(cmd string, args []string, stdout, stderr io.Writer) int {
	return RunStdin(cmd, args, os.Stdin, stdout, stderr)
}

// RunStdin is [Run] with the standard input given (produce reads records
// from it).
func RunStdin(cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, ok := commandTable()[cmd]
	if !ok {
		fmt.Fprintf(stderr, "strata: unknown command %q\n", cmd)
		return ExitUsage
	}
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if c.single != nil {
		return e.runAction(cmd, c.single, args)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stderr
		code := ExitUsage
		if len(args) > 0 {
			w, code = stdout, ExitOK
		}
		c.usage(w, cmd)
		return code
	}
	for _, a := range c.actions {
		if a.name == args[0] {
			return e.runAction(cmd+" "+a.name, a, args[1:])
		}
	}
	fmt.Fprintf(stderr, "strata: %s: unknown action %q (want %s)\n", cmd, args[0], strings.Join(c.actionNames(), ", "))
	return ExitUsage
}

// command is one subcommand: either a group of actions (topic create, topic
// list, ...) or a single action (produce, consume).
type command struct {
	summary string
	actions []*action
	single  *action
}

func (c command) actionNames() []string {
	var out []string
	for _, a := range c.actions {
		out = append(out, a.name)
	}
	return out
}

func (c command) usage(w io.Writer, name string) {
	fmt.Fprintf(w, "usage: strata %s <action> [flags]\n\n%s\n\nactions:\n", name, c.summary)
	for _, a := range c.actions {
		fmt.Fprintf(w, "  %-16s %s\n", a.name, a.summary)
	}
	fmt.Fprintf(w, "\nRun 'strata %s <action> --help' for an action's flags.\n", name)
}

// action is one runnable leaf. define registers the action's own flags on
// fs and returns the function that runs it; completion calls define on a
// throwaway FlagSet to list the real flags.
type action struct {
	name    string
	args    string // positional arguments, for usage
	summary string
	// noFormat: --format is not the table|json switch (produce, consume
	// define their own meaning or none).
	noFormat bool
	define   func(fs *flag.FlagSet) runFunc
}

type runFunc func(e *env, pos []string) error

func commandTable() map[string]command {
	return map[string]command{
		"topic":      {summary: "create, list, describe, configure, grow and delete topics", actions: topicActions()},
		"group":      {summary: "list, describe (with lag), reset offsets of and delete consumer groups", actions: groupActions()},
		"cluster":    {summary: "describe the cluster: id, controller, brokers; elect leaders", actions: clusterActions()},
		"txn":        {summary: "list, describe, find hanging and abort transactions (Kafka's kafka-transactions.sh)", actions: txnActions()},
		"acl":        {summary: "create, list and delete ACL bindings (Kafka's kafka-acls.sh)", actions: aclActions()},
		"user":       {summary: "create, list and delete SCRAM users (Kafka's kafka-configs.sh --entity-type users)", actions: userActions()},
		"quota":      {summary: "set and describe client quotas (Kafka's kafka-configs.sh --entity-type users/clients/ips)", actions: quotaActions()},
		"produce":    {summary: "produce records read from stdin (one per line, or JSON lines)", single: produceAction()},
		"consume":    {summary: "consume records and print them (text, format string or JSON lines)", single: consumeAction()},
		"completion": {summary: "print a shell completion script (bash, zsh or fish)", single: completionAction()},
	}
}

// env is one invocation: its streams, the global flags and the clients it
// opened.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	brokers []string
	format  string
	timeout time.Duration
	// sec is the clients' security: --command-config, $STRATA_COMMAND_CONFIG
	// and the STRATA_CLIENT_* variables (internal/clientsec).
	sec *clientsec.Config

	cl  *kgo.Client
	adm *kadm.Client
}

// globalFlags are added to every action except completion.
type globalFlags struct {
	brokers string
	format  string
	timeout time.Duration

	commandConfig string
}

func addGlobalFlags(fs *flag.FlagSet, g *globalFlags, withFormat bool, formatDefault, formatHelp string) {
	def := os.Getenv("STRATA_BROKERS")
	if def == "" {
		def = DefaultBrokers
	}
	fs.StringVar(&g.brokers, "brokers", def, "comma-separated seed brokers host:port (default $STRATA_BROKERS, else "+DefaultBrokers+")")
	if withFormat {
		fs.StringVar(&g.format, "format", formatDefault, formatHelp)
	}
	fs.DurationVar(&g.timeout, "timeout", 10*time.Second, "bound on connecting and on each operation")
	fs.StringVar(&g.commandConfig, "command-config", "", "Kafka client properties file: security.protocol, ssl.truststore.*, ssl.keystore.*, sasl.mechanism, sasl.jaas.config (default $"+clientsec.EnvCommandConfig+"; each property overridden by $"+clientsec.EnvPrefix+"<NAME>)")
}

func (e *env) runAction(name string, a *action, args []string) int {
	fs := flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := a.define(fs)
	var g globalFlags
	isCompletion := name == "completion"
	if !isCompletion {
		if a.noFormat {
			addGlobalFlags(fs, &g, false, "", "")
		} else {
			addGlobalFlags(fs, &g, true, "table", "output format: table or json")
		}
	}
	help := false
	fs.BoolVar(&help, "help", false, "show this help")
	fs.BoolVar(&help, "h", false, "show this help")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		fmt.Fprintf(e.stderr, "strata: %s: %v\nRun 'strata %s --help' for usage.\n", name, err, name)
		return ExitUsage
	}
	if help {
		actionUsage(e.stdout, name, a, fs)
		return ExitOK
	}
	if !isCompletion {
		if f := fs.Lookup("format"); f != nil && !a.noFormat && g.format != "table" && g.format != "json" {
			fmt.Fprintf(e.stderr, "strata: %s: invalid value %q for flag --format: want table or json\n", name, g.format)
			return ExitUsage
		}
		if g.timeout <= 0 {
			fmt.Fprintf(e.stderr, "strata: %s: invalid value %v for flag --timeout: must be positive\n", name, g.timeout)
			return ExitUsage
		}
		for _, b := range strings.Split(g.brokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				e.brokers = append(e.brokers, b)
			}
		}
		if len(e.brokers) == 0 {
			fmt.Fprintf(e.stderr, "strata: %s: no brokers: set --brokers or $STRATA_BROKERS\n", name)
			return ExitUsage
		}
		e.format, e.timeout = g.format, g.timeout
		sec, err := clientsec.Load(g.commandConfig, os.Environ())
		if err != nil {
			fmt.Fprintf(e.stderr, "strata: %s: %v\n", name, err)
			return ExitUsage
		}
		e.sec = sec
	}
	defer e.close()
	err = run(e, pos)
	var ue usageError
	var done reported
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "strata: %s: %s\nRun 'strata %s --help' for usage.\n", name, ue.msg, name)
		return ExitUsage
	case errors.As(err, &done):
		return ExitFail
	default:
		fmt.Fprintf(e.stderr, "strata: %s\n", err)
		return ExitFail
	}
}

func actionUsage(w io.Writer, name string, a *action, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: strata %s %s [flags]\n\n%s\n\nflags:\n", name, a.args, a.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments (`topic create orders -p 3`), as rpk and kcat allow;
// everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// errUnknownTopic is what a topic missing from a metadata answer is reported
// as (Kafka's own code for it).
var errUnknownTopic = kerr.UnknownTopicOrPartition

// usageError is a command-line mistake found after flag parsing: exit 2.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// reported means the action already printed its errors (several results,
// some failed): exit 1 with nothing more to say.
type reported struct{}

func (reported) Error() string { return "failed" }

// opError is a failed operation: `<what>: <KAFKA_ERROR>: <message>`, or
// `<what>: <error>` for errors that are not Kafka error codes.
type opError struct {
	what string
	err  error
	msg  string // the broker's error message, if it sent one
}

func (o *opError) Error() string { return o.what + ": " + describeErr(o.err, o.msg) }
func (o *opError) Unwrap() error { return o.err }

func fail(what string, err error, msg string) error { return &opError{what: what, err: err, msg: msg} }

// describeErr renders err as `KAFKA_ERROR_NAME: message` when it is a Kafka
// error code (message: the broker's, else the code's description), or as
// its text otherwise.
func describeErr(err error, msg string) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		// A broker's message may itself begin with the code and its
		// description ("INVALID_CONFIG: Configuration is invalid.: why"):
		// the code is printed once, and the broker's own words after it.
		msg = strings.TrimPrefix(msg, ke.Message+": ")
		msg = strings.TrimPrefix(msg, ke.Description+": ")
		if msg == "" || msg == ke.Message {
			msg = ke.Description
		}
		if msg == "" {
			return ke.Message
		}
		return ke.Message + ": " + msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out (raise --timeout?): " + err.Error()
	}
	if msg != "" {
		return err.Error() + ": " + msg
	}
	return err.Error()
}

// emit prints v as indented JSON (--format json) or calls table with an
// aligned tab writer.
func (e *env) emit(v any, table func(w io.Writer)) error {
	if e.format == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// row writes one tab-separated table row.
func row(w io.Writer, cols ...any) {
	for i, c := range cols {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	io.WriteString(w, "\n")
}

// kvFlags collects repeated key=value flags in order.
type kvFlags struct {
	keys []string
	vals map[string]string
}

func (k *kvFlags) String() string { return "" }

func (k *kvFlags) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(key) == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	key = strings.TrimSpace(key)
	if k.vals == nil {
		k.vals = map[string]string{}
	}
	if _, dup := k.vals[key]; !dup {
		k.keys = append(k.keys, key)
	}
	k.vals[key] = val
	return nil
}

// listFlag collects a repeated string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*l = append(*l, v)
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func int32s(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
