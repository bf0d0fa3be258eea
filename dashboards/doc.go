// Package dashboards owns Strata's monitoring configuration: the Grafana
// dashboards (*.json, provisionable as they are), the Prometheus scrape
// configuration (prometheus.yml), the alerting rules (alerts.yml, with
// promtool unit tests in alerts_test.yml) and Grafana's provisioning files
// (grafana/provisioning/). It also owns the few functions that read PromQL
// back out of those files, so tests can check every expression against a
// real Prometheus scraping a real node.
//
// It must never name a metric the code does not export: the dashboards
// test starts a node with tiering on, runs a load, lets a real Prometheus
// scrape it and evaluates every expression; a series that only appears
// under conditions the test cannot create must be on that test's one
// explicit list (conditionalSeries), with the reason. It must never import
// broker internals to do so: the node is observed only through /metrics,
// as Prometheus sees it.
//
// The files are embedded ([Files]) so tools can serve or check them:
//
//	exprs, err := dashboards.Exprs(dashboards.Files)
//	for _, e := range exprs {
//		q, err := dashboards.Substitute(e.Expr, map[string]string{
//			"instance": ".*", "topic": ".*", "group": ".*", "__rate_interval": "1m"})
//		// GET /api/v1/query?query=q, and each of dashboards.Selectors(q)
//	}
package dashboards
