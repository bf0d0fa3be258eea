package loadgen

import (
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kfake"
)

// StartKfake starts franz-go's in-memory kfake cluster of one broker on
// listen (a loopback host:port; port 0 picks one), with partitions as the
// default partition count of auto-created topics. It is the peer baseline
// of the benchmark script: same client, a broker with no disk at all.
// Close the cluster to stop it.
func StartKfake(listen string, partitions int) (*kfake.Cluster, string, error) {
	return StartKfakeDir(listen, partitions, "")
}

// StartKfakeDir is StartKfake persisting to files under dataDir when it
// is not empty (kfake.DataDir: segment and index files per partition,
// written through the page cache and fsynced on roll and shutdown, as
// Kafka's default log.flush settings): the stronger baseline, a Go broker
// that writes what it is sent to disk as Strata does. An existing
// directory's state is reloaded.
func StartKfakeDir(listen string, partitions int, dataDir string) (*kfake.Cluster, string, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, "", fmt.Errorf("loadgen: kfake --listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, "", fmt.Errorf("loadgen: kfake --listen %q: want a loopback address such as 127.0.0.1:0", listen)
	}
	if partitions < 1 {
		return nil, "", fmt.Errorf("loadgen: kfake --partitions %d, want >= 1", partitions)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, listen) }),
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, "", fmt.Errorf("loadgen: kfake: %w", err)
	}
	return c, c.ListenAddrs()[0], nil
}

// serveProcessMetrics serves this process's CPU and memory
// (process_cpu_seconds_total, process_resident_memory_bytes: the
// Prometheus process collector, as a Strata node exports them) on a
// loopback listen address at /metrics, so that `--metrics-url` samples
// kfake's CPU as it samples a Strata node's. It returns the URL and a
// function that stops the server.
func serveProcessMetrics(listen string) (string, func(), error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", nil, fmt.Errorf("loadgen: kfake --metrics-listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", nil, fmt.Errorf("loadgen: kfake --metrics-listen %q: want a loopback address such as 127.0.0.1:0", listen)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", nil, fmt.Errorf("loadgen: kfake --metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/metrics", func() { srv.Close() }, nil
}
