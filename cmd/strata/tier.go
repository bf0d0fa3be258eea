package main

// strata tier status|restore: the remote tier's admin commands. They talk
// to a node's admin listener (admin.listener, default 127.0.0.1:9644) over
// HTTP, not the Kafka protocol: what they show and do (upload lag, restore
// from the bucket) has no Kafka API.

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
	"strings"
	"text/tabwriter"
	"time"
)

func init() {
	addCommand(command{name: "tier", summary: "remote tier: status (per partition), restore a topic from the bucket", run: tierCmd})
}

const tierUsage = `usage: strata tier <status|restore> [flags]

  status  [--topic T]   per partition: log start, local start, remote start and end,
                        log end, local and remote bytes, upload lag
  restore --topic T [--config k=v]...
                        rebuild T's partitions from the bucket's manifests (a node
                        whose disk, or whole cluster metadata, lost them); a topic
                        the cluster lacks is created with its old id and the configs
                        its manifests recorded (none recorded: retention.ms and
                        retention.bytes -1, so nothing restored expires until you
                        say so), then --config

flags:
  --admin host:port     the node's admin listener (default $STRATA_ADMIN or 127.0.0.1:9644)
  --format table|json   output format (default table)
  --timeout d           request timeout (default 30s status, 5m restore)
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
	if sub != "status" && sub != "restore" {
		fmt.Fprintf(stderr, "strata tier: unknown subcommand %q\n%s", sub, tierUsage)
		return 2
	}
	fs := flag.NewFlagSet("tier "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, tierUsage) }
	admin := fs.String("admin", envOr("STRATA_ADMIN", "127.0.0.1:9644"), "admin listener host:port")
	topic := fs.String("topic", "", "topic")
	format := fs.String("format", "table", "table or json")
	def := 30 * time.Second
	if sub == "restore" {
		def = 5 * time.Minute
	}
	timeout := fs.Duration("timeout", def, "request timeout")
	var cfgs multiFlag
	fs.Var(&cfgs, "config", "topic config name=value for a topic restore creates (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *format != "table" && *format != "json" {
		fmt.Fprintf(stderr, "strata tier %s: --format must be table or json, not %q\n", sub, *format)
		return 2
	}
	if sub == "restore" && *topic == "" {
		fmt.Fprintln(stderr, "strata tier restore: --topic is required")
		return 2
	}
	base := *admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	q := url.Values{}
	if *topic != "" {
		q.Set("topic", *topic)
	}
	for _, c := range cfgs {
		if !strings.Contains(c, "=") {
			fmt.Fprintf(stderr, "strata tier %s: --config %q: want name=value\n", sub, c)
			return 2
		}
		q.Add("config", c)
	}
	method, path := http.MethodGet, "/v1/tier/status"
	if sub == "restore" {
		method, path = http.MethodPost, "/v1/tier/restore"
	}
	body, err := adminCall(ctx, method, base+path+"?"+q.Encode())
	if err != nil {
		fmt.Fprintf(stderr, "strata tier %s: %v\n", sub, err)
		return 1
	}
	if *format == "json" {
		stdout.Write(body)
		return 0
	}
	if sub == "status" {
		return printTierStatus(body, stdout, stderr)
	}
	return printRestore(body, stdout, stderr)
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

// adminCall does one admin HTTP request and returns the body of a 200; any
// other answer becomes one error line (the endpoint's {"error": ...}).
func adminCall(ctx context.Context, method, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
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
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, errors.New(e.Error)
		}
		return nil, fmt.Errorf("%s %s: %s", method, req.URL.Path, resp.Status)
	}
	return body, nil
}

type tierStatusRow struct {
	Topic             string
	Index             int32
	LogStart          int64
	LocalStart        int64
	LogEnd            int64
	RemoteStart       int64
	RemoteEnd         int64
	LocalBytes        int64
	RemoteBytes       int64
	RemoteSegments    int
	UploadLagBytes    int64
	UploadLagSegments int
}

func printTierStatus(body []byte, stdout, stderr io.Writer) int {
	rows, err := decodeStatus(string(body))
	if err != nil {
		fmt.Fprintf(stderr, "strata tier status: bad answer: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPART\tLOG-START\tLOCAL-START\tREMOTE-START\tREMOTE-END\tLOG-END\tLOCAL-BYTES\tREMOTE-BYTES\tREMOTE-SEGS\tLAG-BYTES\tLAG-SEGS\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Topic, r.Index, r.LogStart, r.LocalStart,
			orDash(r.RemoteStart), orDash(r.RemoteEnd), r.LogEnd, r.LocalBytes, r.RemoteBytes, r.RemoteSegments, r.UploadLagBytes, r.UploadLagSegments)
	}
	tw.Flush()
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

func printRestore(body []byte, stdout, stderr io.Writer) int {
	var res struct {
		Topic      string
		TopicID    string
		Created    bool
		Partitions []struct {
			Partition  int32
			Segments   int
			Registered int
			LogStart   int64
			LogEnd     int64
		}
	}
	if err := json.Unmarshal(body, &res); err != nil {
		fmt.Fprintf(stderr, "strata tier restore: bad answer: %v\n", err)
		return 1
	}
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
	return 0
}

// decodeStatus parses /v1/tier/status's JSON.
func decodeStatus(body string) ([]tierStatusRow, error) {
	var rows []tierStatusRow
	err := json.Unmarshal([]byte(body), &rows)
	return rows, err
}
