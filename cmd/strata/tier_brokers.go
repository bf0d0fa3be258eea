package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/clientsec"
)

// findAdminListeners finds the brokers' admin listeners through the
// cluster, as every other client subcommand finds the cluster: a Metadata
// request to the seeds lists the brokers, and a DescribeConfigs of each
// reads its admin.listener. A listener bound to every address (0.0.0.0,
// [::] or an empty host) is reached at the broker's own host. The result
// is sorted by broker id. A broker with no admin listener, or one on port
// 0 (any port: its bound address is not in the config), is an error
// naming the broker and saying to use --admin.
func findAdminListeners(ctx context.Context, seeds string, sec *clientsec.Config) ([]string, error) {
	var addrs []string
	for _, s := range strings.Split(seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			addrs = append(addrs, s)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no brokers in %q", seeds)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ClientID("strata-cli"), kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(10 * time.Second)}, sec.KgoOpts()...)...)
	if err != nil {
		return nil, fmt.Errorf("bad --brokers %q: %v", seeds, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot reach brokers %s: %v", strings.Join(addrs, ","), err)
	}
	brokers := slices.Clone(meta.Brokers)
	slices.SortFunc(brokers, func(a, b kadm.BrokerDetail) int { return int(a.NodeID - b.NodeID) })
	var out []string
	for _, b := range brokers {
		rcs, err := adm.DescribeBrokerConfigs(ctx, b.NodeID)
		if err == nil {
			_, err = rcs.On(fmt.Sprint(b.NodeID), nil)
		}
		if err != nil {
			return nil, fmt.Errorf("broker %d (%s:%d): describe its configs: %v", b.NodeID, b.Host, b.Port, err)
		}
		v, scheme := "", "http://"
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == "admin.listener" && c.Value != nil {
					v = *c.Value
				}
				if c.Key == "admin.listener.security.protocol" && c.Value != nil && strings.EqualFold(*c.Value, "SSL") {
					scheme = "https://"
				}
			}
		}
		host, port, err := net.SplitHostPort(v)
		switch {
		case v == "":
			return nil, fmt.Errorf("broker %d (%s:%d) has no admin listener (admin.listener is empty)", b.NodeID, b.Host, b.Port)
		case err != nil:
			return nil, fmt.Errorf("broker %d (%s:%d): admin.listener %q: %v", b.NodeID, b.Host, b.Port, v, err)
		case port == "0":
			return nil, fmt.Errorf("broker %d (%s:%d) has admin.listener %s (any port): its bound port is not known to the cluster; give --admin host:port", b.NodeID, b.Host, b.Port, v)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = b.Host
		}
		out = append(out, scheme+net.JoinHostPort(host, port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("brokers %s: the cluster lists no broker", strings.Join(addrs, ","))
	}
	return out, nil
}
