package group

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the coordinator's group metrics. Groups by state and members
// are counted at scrape time under the coordinator's lock (no counts to
// keep in step with every transition); rebalances is a counter bumped at
// the end of each join phase (one per generation).
type metrics struct {
	c          *Coordinator
	groups     *prometheus.Desc
	members    *prometheus.Desc
	rebalances prometheus.Counter
	registered bool
}

func newMetrics(c *Coordinator) *metrics {
	return &metrics{
		c: c,
		groups: prometheus.NewDesc("strata_group_groups", "Consumer groups this broker coordinates, by state.",
			[]string{"state"}, nil),
		members: prometheus.NewDesc("strata_group_members", "Members of the consumer groups this broker coordinates.", nil, nil),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "strata", Subsystem: "group", Name: "rebalances_total",
			Help: "Completed join phases (each one a new generation) of the groups this broker coordinates."}),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.groups
	ch <- m.members
	m.rebalances.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	var byState [Dead + 1]int
	members := 0
	m.c.mu.Lock()
	for _, g := range m.c.groups {
		byState[g.state]++
		members += len(g.members)
	}
	m.c.mu.Unlock()
	for s, n := range byState {
		ch <- prometheus.MustNewConstMetric(m.groups, prometheus.GaugeValue, float64(n), State(s).String())
	}
	ch <- prometheus.MustNewConstMetric(m.members, prometheus.GaugeValue, float64(members))
	m.rebalances.Collect(ch)
}

type clientKey struct{}

type clientInfo struct{ id, host string }

// WithClient returns ctx carrying the request's client id (request header)
// and client host (the connection's remote address, "/127.0.0.1" style as
// Kafka reports it), which JoinGroup records for DescribeGroups.
func WithClient(ctx context.Context, clientID, clientHost string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{clientID, clientHost})
}

func clientOf(ctx context.Context) (string, string) {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci.id, ci.host
}
