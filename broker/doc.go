// Package broker is the Kafka side of a Strata node: listeners and
// connections, the request pipeline, one handler per API key, the
// partitions this broker hosts (leadership, leader epoch, high watermark,
// waiting fetches), and the wiring of a node: storage.Manager on log.dirs,
// the controller (in-process in combined mode, or a client of the quorum),
// registration, heartbeats and the metadata follower.
//
// It owns the wire protocol as franz-go's kmsg encodes it: requests are
// decoded with kmsg and responses encoded with kmsg; the only bytes the
// broker frames itself are request/response headers and the length
// prefixes around record bytes it splices from segment files (see
// 01_fetch.go). Record data is never copied into the Go heap on the fetch
// path: it goes from the page cache to the socket with sendfile(2).
//
// It must never encode protocol structures by hand where kmsg does it,
// touch segment files other than through storage.Log and its ReadViews,
// decide metadata (placement, elections, config validation are the
// controller's), or serve a partition the metadata does not say it leads.
//
// Usage (what `strata serve` does):
//
//	cfg, err := broker.LoadConfig(broker.ConfigSources{File: fileProps, Env: os.Environ(), Flags: setFlags})
//	if err != nil { ... }
//	n, err := broker.Open(broker.Options{Config: cfg, Logger: slog.Default()})
//	if err != nil { ... }
//	fmt.Println(n.Addrs()) // bound addresses (listeners may use port 0)
//	<-sigterm
//	n.Close() // stop accepting, answer in-flight requests, flush, clean-shutdown marker
//
// Read DESIGN.md first: file map, lock order, invariants, skipped features.
package broker
