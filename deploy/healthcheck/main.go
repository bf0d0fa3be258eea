// Command healthcheck is the container image's probe: it GETs one URL
// (the node's /readyz) and exits 0 on a 200 answer, 1 otherwise, printing
// why. The final image is distroless (no shell, no curl), so
// docker-compose.yml's healthcheck runs this static binary.
//
// It owns nothing but that probe; it must never talk Kafka, read the
// node's data or configuration, or wait longer than its timeout.
//
//	healthcheck [-timeout 2s] http://127.0.0.1:9644/readyz
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "deadline of the whole probe")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: healthcheck [-timeout 2s] URL")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := check(ctx, fs.Arg(0)); err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	return 0
}

// check GETs url and returns nil on 200, else an error carrying the
// status and the start of the body (/readyz lists its failing checks).
func check(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
