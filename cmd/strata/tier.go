package main

// strata tier status|list|verify|restore: the remote tier's admin
// commands. They talk to a node's admin listener (admin.listener, default
// 127.0.0.1:9644) over HTTP, not the Kafka protocol: what they show and do
// (upload lag, the bucket's contents, restore from the bucket) has no
// Kafka API. --brokers finds the admin listeners through the cluster
// (tier_brokers.go).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/clientsec"
)

func init() {
	addCommand(command{name: "tier", summary: "remote tier: status, list and verify the bucket, restore topics from it", run: tierCmd})
}

const tierUsage = `usage: strata tier <status|list|verify|restore> [flags]

  status  [--topic T]   per partition: log start, local start, remote start and end,
                        log end, local and remote bytes, upload lag, and remote
                        segments whose objects reads found missing
  list                  every topic in the bucket (name, id, partitions, segments,
                        bytes, remote start and end offsets) and whether the
                        cluster still has it: present, lost (restorable),
                        replaced (the name now has another id) or deleting
  verify  [--topic T]   check that every remote segment the cluster registered has
                        its objects in the bucket with the recorded sizes; exit 1
                        when any is missing or of the wrong size
  restore --topic T [--config k=v]...
                        rebuild T's partitions from the bucket's manifests (a node
                        whose disk, or whole cluster metadata, lost them); a topic
                        the cluster lacks is created with its old id and the configs
                        its manifests recorded (none recorded: retention.ms and
                        retention.bytes -1, so nothing restored expires until you
                        say so), then --config
  restore --all         restore every topic that list shows as lost

flags:
  --admin host:port     a node's admin listener (default $STRATA_ADMIN or 127.0.0.1:9644)
  --brokers h:p,...     find the admin listeners through the cluster instead: each
                        broker's admin.listener (status asks every broker and merges
                        what they lead; the other commands ask the lowest id)
  --command-config FILE Kafka client properties (default $STRATA_COMMAND_CONFIG): the
                        security of --brokers' Kafka connections, and for an https
                        admin listener (https://host:port, or found through --brokers
                        when its admin.listener.security.protocol is SSL) the trust
                        store and client certificate (ssl.truststore.*, ssl.keystore.*)
  --admin-token-file F  file holding the admin listener's bearer token (admin.auth.token;
                        default $STRATA_ADMIN_TOKEN_FILE, or the token itself in
                        $STRATA_ADMIN_TOKEN; never on the command line)
  --format table|json   output format (default table)
  --timeout d           request timeout (default 30s status and list, 10m verify,
                        5m restore, 30m restore --all)

Topic ids are printed as Kafka prints them (URL-safe base64, no padding).
`

func tierCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, tierUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	switch sub {
	case "status", "list", "verify", "restore":
	default:
		fmt.Fprintf(stderr, "strata tier: unknown subcommand %q\n%s", sub, tierUsage)
		return 2
	}
	fs := flag.NewFlagSet("tier "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, tierUsage) }
	admin := fs.String("admin", "", "admin listener host:port")
	brokers := fs.String("brokers", "", "seed brokers host:port,... to find the admin listeners through")
	topic := fs.String("topic", "", "topic")
	all := fs.Bool("all", false, "restore every topic the metadata lost")
	format := fs.String("format", "table", "table or json")
	timeout := fs.Duration("timeout", 0, "request timeout")
	commandConfig := fs.String("command-config", "", "Kafka client properties file")
	tokenFile := fs.String("admin-token-file", "", "file holding the admin bearer token")
	var cfgs multiFlag
	fs.Var(&cfgs, "config", "topic config name=value for a topic restore creates (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata tier %s: unexpected argument %q\n", sub, fs.Arg(0))
		return 2
	}
	if *format != "table" && *format != "json" {
		fmt.Fprintf(stderr, "strata tier %s: --format must be table or json, not %q\n", sub, *format)
		return 2
	}
	switch {
	case sub == "restore" && *topic == "" && !*all:
		fmt.Fprintln(stderr, "strata tier restore: --topic or --all is required")
		return 2
	case sub == "restore" && *topic != "" && *all:
		fmt.Fprintln(stderr, "strata tier restore: give --topic or --all, not both")
		return 2
	case sub != "restore" && (*all || len(cfgs) > 0):
		fmt.Fprintf(stderr, "strata tier %s: --all and --config are restore's flags\n", sub)
		return 2
	case sub == "list" && *topic != "":
		fmt.Fprintln(stderr, "strata tier list: lists the whole bucket; no --topic")
		return 2
	case *admin != "" && *brokers != "":
		fmt.Fprintf(stderr, "strata tier %s: give --admin or --brokers, not both\n", sub)
		return 2
	}
	if *timeout <= 0 {
		*timeout = map[string]time.Duration{"status": 30 * time.Second, "list": 30 * time.Second, "verify": 10 * time.Minute, "restore": 5 * time.Minute}[sub]
		if *all {
			*timeout = 30 * time.Minute
		}
	}
	q := url.Values{}
	if *topic != "" {
		q.Set("topic", *topic)
	}
	if *all {
		q.Set("all", "true")
	}
	for _, c := range cfgs {
		if !strings.Contains(c, "=") {
			fmt.Fprintf(stderr, "strata tier %s: --config %q: want name=value\n", sub, c)
			return 2
		}
		q.Add("config", c)
	}
	sec, err := clientsec.Load(*commandConfig, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "strata tier %s: %v\n", sub, err)
		return 2
	}
	token, err := adminToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "strata tier %s: %v\n", sub, err)
		return 2
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: sec.HTTPTransportTLS()}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	// Where to send it: --admin, else the admin listeners --brokers
	// finds, else $STRATA_ADMIN, else $STRATA_BROKERS's, else the default.
	var admins []string
	switch {
	case *admin != "":
		admins = []string{*admin}
	case *brokers != "":
		as, err := findAdminListeners(ctx, *brokers, sec)
		if err != nil {
			fmt.Fprintf(stderr, "strata tier %s: %v\n", sub, err)
			return 1
		}
		admins = as
	case os.Getenv("STRATA_ADMIN") != "":
		admins = []string{os.Getenv("STRATA_ADMIN")}
	case os.Getenv("STRATA_BROKERS") != "":
		as, err := findAdminListeners(ctx, os.Getenv("STRATA_BROKERS"), sec)
		if err != nil {
			fmt.Fprintf(stderr, "strata tier %s: $STRATA_BROKERS: %v\n", sub, err)
			return 1
		}
		admins = as
	default:
		admins = []string{"127.0.0.1:9644"}
	}
	if sub != "status" {
		admins = admins[:1]
	}
	method, path := http.MethodGet, "/v1/tier/"+sub
	if sub == "restore" {
		method = http.MethodPost
	}
	var bodies [][]byte
	for _, a := range admins {
		base := a
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		body, err := adminCall(ctx, hc, token, method, base+path+"?"+q.Encode())
		if err != nil {
			fmt.Fprintf(stderr, "strata tier %s: %v\n", sub, err)
			return 1
		}
		bodies = append(bodies, body)
	}
	switch sub {
	case "status":
		return printTierStatus(bodies, *format, stdout, stderr)
	case "list":
		return printTierList(bodies[0], *format, stdout, stderr)
	case "verify":
		return printVerify(bodies[0], *format, stdout, stderr)
	}
	if *all {
		return printRestoreAll(bodies[0], *format, stdout, stderr)
	}
	if *format == "json" {
		stdout.Write(bodies[0])
		return 0
	}
	return printRestore(bodies[0], stdout, stderr)
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// adminToken is the admin bearer token: the file's content (the flag,
// else $STRATA_ADMIN_TOKEN_FILE), else $STRATA_ADMIN_TOKEN, else none.
func adminToken(file string) (string, error) {
	if file == "" {
		file = os.Getenv("STRATA_ADMIN_TOKEN_FILE")
	}
	if file == "" {
		return strings.TrimSpace(os.Getenv("STRATA_ADMIN_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("admin token: %v", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("admin token: %s is empty", file)
	}
	return tok, nil
}

// adminCall does one admin HTTP request and returns the body of a 200; any
// other answer becomes one error line (the endpoint's {"error": ...}).
func adminCall(ctx context.Context, hc *http.Client, token, method, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot reach the admin listener %s: %v", req.URL.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := fmt.Sprintf("%s %s: %s", method, req.URL.Path, resp.Status)
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized && token == "" {
			msg += " (401: give the admin listener's token in $STRATA_ADMIN_TOKEN or --admin-token-file, or a client certificate in --command-config)"
		}
		return nil, errors.New(msg)
	}
	return body, nil
}

// tierStatusRow is one row of /v1/tier/status: the broker's own type, so
// the client decodes exactly what the admin listener encodes.
type tierStatusRow = broker.TierStatusRow

func printTierStatus(bodies [][]byte, format string, stdout, stderr io.Writer) int {
	var rows []tierStatusRow
	for _, b := range bodies {
		rs, err := decodeStatus(string(b))
		if err != nil {
			fmt.Fprintf(stderr, "strata tier status: bad answer: %v\n", err)
			return 1
		}
		rows = append(rows, rs...)
	}
	slices.SortFunc(rows, func(a, b tierStatusRow) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	if format == "json" {
		if rows == nil {
			rows = []tierStatusRow{}
		}
		return writeJSONOut(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPART\tLOG-START\tLOCAL-START\tREMOTE-START\tREMOTE-END\tLOG-END\tLOCAL-BYTES\tREMOTE-BYTES\tREMOTE-SEGS\tLAG-BYTES\tLAG-SEGS\tMISSING-SEGS\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Topic, r.Partition, r.LogStart, r.LocalStart,
			orDash(r.RemoteStart), orDash(r.RemoteEnd), r.LogEnd, r.LocalBytes, r.RemoteBytes, r.RemoteSegments, r.UploadLagBytes, r.UploadLagSegments, len(r.MissingSegments))
	}
	tw.Flush()
	for _, r := range rows {
		for _, m := range r.MissingSegments {
			fmt.Fprintf(stdout, "missing: %s partition %d offsets [%d, %d]: %s\n", r.Topic, r.Partition, m.BaseOffset, m.EndOffset, m.Key)
		}
	}
	if len(rows) == 0 {
		fmt.Fprintln(stderr, "(no partition led by this node has remote.storage.enable=true)")
	}
	return 0
}

func orDash(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// restoreResult is /v1/tier/restore's answer (broker.RestoreResult).
type restoreResult struct {
	Topic      string `json:"topic"`
	TopicID    string `json:"topic_id"`
	Created    bool   `json:"created"`
	Partitions []struct {
		Partition  int32 `json:"partition"`
		Segments   int   `json:"segments"`
		Registered int   `json:"registered"`
		LogStart   int64 `json:"log_start"`
		LogEnd     int64 `json:"log_end"`
	} `json:"partitions"`
}

func printRestore(body []byte, stdout, stderr io.Writer) int {
	var res restoreResult
	if err := json.Unmarshal(body, &res); err != nil {
		fmt.Fprintf(stderr, "strata tier restore: bad answer: %v\n", err)
		return 1
	}
	printRestored(res, stdout)
	return 0
}

func printRestored(res restoreResult, stdout io.Writer) {
	verb := "existing topic"
	if res.Created {
		verb = "created topic"
	}
	fmt.Fprintf(stdout, "restored %s %q (id %s)\n", verb, res.Topic, res.TopicID)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PART\tSEGMENTS\tREGISTERED\tLOG-START\tLOG-END\t")
	for _, p := range res.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t\n", p.Partition, p.Segments, p.Registered, orDash(p.LogStart), orDash(p.LogEnd))
	}
	tw.Flush()
}

type restoreSkip struct {
	Topic   string `json:"topic"`
	TopicID string `json:"topic_id"`
	Reason  string `json:"reason"`
	Detail  string `json:"detail"`
}

func printRestoreAll(body []byte, format string, stdout, stderr io.Writer) int {
	var res struct {
		Restored []restoreResult `json:"restored"`
		Skipped  []restoreSkip   `json:"skipped"`
		Failed   []restoreSkip   `json:"failed"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		fmt.Fprintf(stderr, "strata tier restore: bad answer: %v\n", err)
		return 1
	}
	code := 0
	if len(res.Failed) > 0 {
		code = 1
	}
	if format == "json" {
		stdout.Write(body)
		return code
	}
	for _, r := range res.Restored {
		printRestored(r, stdout)
	}
	for _, s := range res.Skipped {
		why := s.Reason
		if s.Detail != "" {
			why += ": " + s.Detail
		}
		fmt.Fprintf(stdout, "skipped %q (id %s): %s\n", s.Topic, s.TopicID, why)
	}
	for _, s := range res.Failed {
		fmt.Fprintf(stderr, "strata tier restore: %q (id %s): %s\n", s.Topic, s.TopicID, s.Reason)
	}
	if len(res.Restored)+len(res.Skipped)+len(res.Failed) == 0 {
		fmt.Fprintln(stderr, "(the bucket holds no topic)")
	} else if len(res.Restored) == 0 && len(res.Failed) == 0 {
		fmt.Fprintln(stderr, "(no topic of the bucket is lost: nothing to restore)")
	}
	return code
}

// bucketTopic is one row of /v1/tier/list (broker.BucketTopicRow).
type bucketTopic struct {
	Topic      string `json:"topic"`
	TopicID    string `json:"topic_id"`
	State      string `json:"state"`
	UpdatedAt  int64  `json:"updated_at"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Segments  int   `json:"segments"`
		Objects   int   `json:"objects"`
		Bytes     int64 `json:"bytes"`
		LogStart  int64 `json:"log_start"`
		EndOffset int64 `json:"end_offset"`
		Manifest  bool  `json:"manifest"`
	} `json:"partitions"`
}

func printTierList(body []byte, format string, stdout, stderr io.Writer) int {
	var rows []bucketTopic
	if err := json.Unmarshal(body, &rows); err != nil {
		fmt.Fprintf(stderr, "strata tier list: bad answer: %v\n", err)
		return 1
	}
	if format == "json" {
		stdout.Write(body)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tTOPIC-ID\tSTATE\tPART\tSEGMENTS\tBYTES\tREMOTE-START\tREMOTE-END\t")
	for _, r := range rows {
		for _, p := range r.Partitions {
			start := orDash(p.LogStart)
			if !p.Manifest {
				start = "(no manifest)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n", r.Topic, r.TopicID, r.State, p.Partition, p.Segments, p.Bytes, start, orDash(p.EndOffset))
		}
	}
	tw.Flush()
	if len(rows) == 0 {
		fmt.Fprintln(stderr, "(the bucket holds no topic)")
	}
	return 0
}

func printVerify(body []byte, format string, stdout, stderr io.Writer) int {
	var res struct {
		Partitions int `json:"partitions"`
		Segments   int `json:"segments"`
		Problems   []struct {
			Topic      string `json:"topic"`
			Partition  int32  `json:"partition"`
			BaseOffset int64  `json:"base_offset"`
			EndOffset  int64  `json:"end_offset"`
			Key        string `json:"key"`
			Problem    string `json:"problem"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		fmt.Fprintf(stderr, "strata tier verify: bad answer: %v\n", err)
		return 1
	}
	code := 0
	if len(res.Problems) > 0 {
		code = 1
	}
	if format == "json" {
		stdout.Write(body)
		return code
	}
	for _, p := range res.Problems {
		fmt.Fprintf(stdout, "%s partition %d offsets [%d, %d]: %s: %s\n", p.Topic, p.Partition, p.BaseOffset, p.EndOffset, p.Key, p.Problem)
	}
	fmt.Fprintf(stdout, "checked %d remote segments of %d partitions: %d problems\n", res.Segments, res.Partitions, len(res.Problems))
	return code
}

func writeJSONOut(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	return 0
}

// decodeStatus parses /v1/tier/status's JSON.
func decodeStatus(body string) ([]tierStatusRow, error) {
	var rows []tierStatusRow
	err := json.Unmarshal([]byte(body), &rows)
	return rows, err
}
