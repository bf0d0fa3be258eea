package broker

// The admin HTTP listener (admin.listener, default 127.0.0.1:9644; empty
// disables it):
//
//	/metrics       Prometheus text format from the node's own Registry:
//	               broker, topic, log and storage metrics (metrics.go), the
//	               controller's (combined mode), Go runtime and process
//	               collectors. Names: DESIGN.md, "Metrics".
//	/healthz       200 "ok" while the process serves HTTP at all (liveness).
//	/readyz        200 "ready" when every check in [Node.readiness] passes,
//	               else 503 with the failing checks, one per line. A node
//	               is not ready before Open returns, nor once Close starts.
//	/debug/pprof/  net/http/pprof: index, profiles, cmdline, symbol, trace.
//
// Security (admin.listener.security.protocol, admin.auth.*): over SSL the
// listener speaks https with the ssl.* settings (listener.name.admin.ssl.*
// overriding them). Authentication is required once admin.auth.token (or
// admin.auth.token.file) is set or the listener asks for client
// certificates (ssl.client.auth requested|required): then every path but
// admin.auth.public.paths (default /healthz, /readyz, /metrics: probes and
// scrapers) needs "Authorization: Bearer <token>" (compared in constant
// time) or a verified client certificate whose principal is in
// super.users (any verified one when super.users is empty), else 401.
// Without any of these, GETs are open and the mutating endpoints (POST
// /v1/tier/restore, anything not GET or HEAD) are served only to a client
// connecting from a loopback address (403 otherwise): a local operator
// keeps working, a remote stranger cannot restore topics.
//
// It is bound first thing in Open, before storage loads, so a node that is
// recovering a large data directory already answers /healthz (200) and
// /readyz (503: storage loading) — what an orchestrator's probes expect.
// It closes last in Close.

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-io/strata/broker/authz"
)

// adminShutdownTimeout bounds how long Close waits for admin requests in
// progress (a CPU profile runs for its seconds= parameter) before closing
// their connections.
const adminShutdownTimeout = 2 * time.Second

// nodeHealth is what /readyz judges. Each field is written by the
// goroutine that learns it and read by HTTP handlers, hence atomics.
type nodeHealth struct {
	storeLoaded atomic.Bool  // storage.Manager opened and started (n.store is set)
	registered  atomic.Bool  // the controller accepted our registration
	serving     atomic.Bool  // Open returned and Close has not started
	lastBeat    atomic.Int64 // unix nanos of the last heartbeat the controller answered
	// lastBeatSent is when the last answered heartbeat was sent (unix
	// nanos): the controller heard from this broker no earlier than that,
	// so a session timeout past it, it has fenced this broker (presumedFenced).
	lastBeatSent atomic.Int64
	recovery     atomic.Value // recoverySummary, once storage loaded
}

// readiness reports whether the node is ready to serve clients, and
// otherwise which checks fail.
//
// Ready means: storage loaded every log; a controller leader answered this
// broker's last heartbeat within broker.session.timeout.ms (the quorum has
// a leader that knows us — in combined mode as in broker-only mode); the
// broker is registered and unfenced (the controller unfences a broker once
// its reconciled metadata offset has caught up); the broker has loaded and
// reconciled a metadata image; and Open has returned (listeners accepting)
// and Close has not begun. A delta being reconciled right now does not
// make the node unready: that would flap /readyz on every metadata change.
func (n *Node) readiness() (bool, []string) {
	var failing []string
	check := func(ok bool, what string) {
		if !ok {
			failing = append(failing, what)
		}
	}
	h := &n.health
	check(h.storeLoaded.Load(), "storage: not loaded")
	beat := h.lastBeat.Load()
	check(beat != 0 && time.Since(time.Unix(0, beat)) < n.cfg.BrokerSessionTimeout,
		"controller: no leader answered a heartbeat within broker.session.timeout.ms")
	check(h.registered.Load(), "broker: not registered with the controller")
	check(!n.fenced.Load(), "broker: fenced")
	check(n.metadataOffset() >= 0, "metadata: no image reconciled yet")
	check(h.serving.Load(), "node: not serving (starting or stopping)")
	return len(failing) == 0, failing
}

// adminServer is the running admin HTTP listener.
type adminServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve returned
}

// startAdmin serves the admin endpoints on ln, or on a new listener bound
// to admin.listener when ln is nil. An empty admin.listener (and no ln)
// serves nothing.
func (n *Node) startAdmin(ln net.Listener, gatherer prometheus.Gatherer) error {
	if ln == nil {
		if n.cfg.AdminListener == "" {
			return nil
		}
		var err error
		if ln, err = net.Listen("tcp", n.cfg.AdminListener); err != nil {
			return fmt.Errorf("broker: admin.listener: listen %s: %w", n.cfg.AdminListener, err)
		}
	}
	if err := n.reg.Register(n.metrics.adminRefused); err != nil {
		ln.Close()
		return fmt.Errorf("broker: register metrics: %w", err)
	}
	if n.cfg.AdminTLS != nil {
		ts, err := newTLSSource(n.cfg.AdminTLS, n.logger)
		if err != nil {
			ln.Close()
			return err
		}
		n.adminTLS = ts
		ln = tls.NewListener(ln, ts.serverConfig())
	}
	errLog := slog.NewLogLogger(n.logger.Handler(), slog.LevelWarn)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		ErrorLog:      errLog,
		ErrorHandling: promhttp.ContinueOnError, // a failing collector never hides the others
		Timeout:       10 * time.Second,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", n.serveReadyz)
	mux.HandleFunc("/v1/tier/status", n.serveTierStatus)
	mux.HandleFunc("/v1/tier/restore", n.serveTierRestore)
	mux.HandleFunc("/v1/tier/list", n.serveTierList)
	mux.HandleFunc("/v1/tier/verify", n.serveTierVerify)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	a := &adminServer{
		srv: &http.Server{
			Handler:           n.adminAuth(mux),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          errLog,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.logger.Error("broker: admin listener stopped", "err", err)
		}
	}()
	n.admin = a
	return nil
}

// adminAuth enforces the admin listener's authentication (see the top of
// this file) in front of next.
func (n *Node) adminAuth(next http.Handler) http.Handler {
	required := n.cfg.AdminToken != "" || n.cfg.AdminTLS != nil && n.cfg.AdminTLS.ClientAuth != tls.NoClientCert
	superUsers, _ := authz.ParseSuperUsers(n.cfg.Props["super.users"])
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !required {
			if r.Method != http.MethodGet && r.Method != http.MethodHead && !fromLoopback(r) {
				n.metrics.adminRefused.Inc()
				writeJSONError(w, http.StatusForbidden, errors.New("this admin endpoint changes the cluster: set admin.auth.token (or require client certificates) to serve it on a listener that is not loopback"))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if n.adminPublic(r.URL.Path) || n.adminAuthenticated(r, superUsers) {
			next.ServeHTTP(w, r)
			return
		}
		n.metrics.adminRefused.Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata admin"`)
		writeJSONError(w, http.StatusUnauthorized, errors.New("authentication required: Authorization: Bearer <admin.auth.token>, or a trusted client certificate"))
	})
}

// adminPublic reports whether path is one of admin.auth.public.paths (an
// entry ending in / covers the paths under it).
func (n *Node) adminPublic(path string) bool {
	for _, p := range n.cfg.AdminPublicPaths {
		if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// adminAuthenticated reports whether r carries the admin token or came
// over TLS with a verified client certificate of an allowed principal.
func (n *Node) adminAuthenticated(r *http.Request, superUsers []string) bool {
	if tok := n.cfg.AdminToken; tok != "" {
		if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok &&
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(tok)) == 1 {
			return true
		}
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || n.adminTLS == nil {
		return false
	}
	p, err := n.adminTLS.principalOf(*r.TLS)
	if err != nil {
		return false
	}
	return len(superUsers) == 0 || slices.Contains(superUsers, p.String())
}

// fromLoopback reports whether r came from a loopback address (a local
// operator, or `docker exec` into the node's network namespace).
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

func (n *Node) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ok, failing := n.readiness()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(failing, "\n"))
		return
	}
	fmt.Fprintln(w, "ready")
}

// close stops the admin listener: requests in progress get
// adminShutdownTimeout to finish, then their connections are closed.
func (a *adminServer) close() error {
	if a == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	if err != nil {
		err = a.srv.Close()
	}
	<-a.done
	if err != nil {
		return fmt.Errorf("broker: close admin listener: %w", err)
	}
	return nil
}

// AdminAddr returns the bound address of the admin HTTP listener, or ""
// when admin.listener is empty.
func (n *Node) AdminAddr() string {
	if n.admin == nil {
		return ""
	}
	return n.admin.ln.Addr().String()
}

// Registry returns the Prometheus registry /metrics serves: the one given
// in Options.Registry if it is a *prometheus.Registry, else the node's own.
func (n *Node) Registry() prometheus.Gatherer { return n.gatherer }

// startMetrics makes the node's registry (Options.Registry, or a new one:
// never the global default, so nodes in one process do not collide),
// registers the broker's metrics on it and starts the admin listener.
// Open calls it first, before storage loads.
func (n *Node) startMetrics(o Options) error {
	n.reg = o.Registry
	if n.reg == nil {
		n.reg = prometheus.NewRegistry()
	}
	var ok bool
	if n.gatherer, ok = n.reg.(prometheus.Gatherer); !ok {
		n.gatherer = prometheus.Gatherers{} // registered elsewhere: the caller serves it
	}
	n.metrics = newMetrics()
	if err := n.metrics.register(n.reg, newNodeCollector(n)); err != nil {
		return fmt.Errorf("broker: register metrics: %w", err)
	}
	return n.startAdmin(o.AdminListener, n.gatherer)
}
