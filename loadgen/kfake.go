package loadgen

import (
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kfake"
)

// StartKfake starts franz-go's in-memory kfake cluster of one broker on
// listen (a loopback host:port; port 0 picks one), with partitions as the
// default partition count of auto-created topics. It is the peer baseline
// of the benchmark script: same client, a broker with no disk at all.
// Close the cluster to stop it.
func StartKfake(listen string, partitions int) (*kfake.Cluster, string, error) {
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
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, listen) }),
	)
	if err != nil {
		return nil, "", fmt.Errorf("loadgen: kfake: %w", err)
	}
	return c, c.ListenAddrs()[0], nil
}
