package broker

import (
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminDo sends method path to an admin listener at base (http:// or
// https://) through cl with the bearer token (none if ""), and returns the
// status code.
func adminDo(t *testing.T, cl *http.Client, method, base, path, token string) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminTokenGuardsEverythingButPublicPaths: with admin.auth.token set,
// a restore without the token, or with another one, is 401 and changes
// nothing; with it the restore runs (404: the bucket holds no such
// topic); the probes and /metrics stay open (admin.auth.public.paths'
// default), pprof and the tier status do not; an empty public list closes
// the probes too. The token is sensitive in DescribeConfigs.
func TestAdminTokenGuardsEverythingButPublicPaths(t *testing.T) {
	n := startNode(t, t.TempDir(), tierSettings(map[string]string{"admin.auth.token": "s3cret-token"}))
	base, cl := "http://"+n.AdminAddr(), &http.Client{Timeout: testWait}
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"POST", "/v1/tier/restore?topic=nosuch", "", 401},
		{"POST", "/v1/tier/restore?topic=nosuch", "wrong", 401},
		{"POST", "/v1/tier/restore?topic=nosuch", "s3cret-token-and-more", 401},
		{"POST", "/v1/tier/restore?topic=nosuch", "s3cret-token", 404},
		{"GET", "/v1/tier/status", "", 401},
		{"GET", "/debug/pprof/", "", 401},
		{"GET", "/debug/pprof/", "s3cret-token", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/metrics", "", 200},
	} {
		if got := adminDo(t, cl, tc.method, base, tc.path, tc.token); got != tc.want {
			t.Errorf("%s %s token %q: %d, want %d", tc.method, tc.path, tc.token, got, tc.want)
		}
	}
	if got := scrapeMetrics(t, n).get(t, "strata_admin_refused_requests_total"); got != 5 {
		t.Errorf("strata_admin_refused_requests_total %v, want 5", got)
	}
	if v, sensitive := describeBrokerConfig(t, n, "admin.auth.token"); v != nil || !sensitive {
		t.Errorf("DescribeConfigs admin.auth.token: value %v sensitive %v, want null and sensitive", v, sensitive)
	}

	locked := startNode(t, t.TempDir(), map[string]string{"admin.auth.token": "x", "admin.auth.public.paths": ""})
	if got := adminDo(t, cl, "GET", "http://"+locked.AdminAddr(), "/healthz", ""); got != 401 {
		t.Errorf("/healthz with no public path: %d, want 401", got)
	}
}

// TestAdminMutatingNeedsAuthOffLoopback: without any admin
// authentication, GETs are served to anyone and a POST only to a client
// on a loopback address (403 from elsewhere).
func TestAdminMutatingNeedsAuthOffLoopback(t *testing.T) {
	n := &Node{cfg: testConfig(t, t.TempDir(), nil), metrics: newMetrics()}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	for _, tc := range []struct {
		remote string
		method string
		want   int
	}{
		{"127.0.0.1:5000", "POST", 200}, {"[::1]:5000", "POST", 200}, {"127.0.0.1:5000", "GET", 200},
		{"10.1.2.3:5000", "GET", 200}, {"10.1.2.3:5000", "HEAD", 200}, {"10.1.2.3:5000", "POST", 403},
		{"[2001:db8::1]:5000", "DELETE", 403}, {"garbage", "POST", 403},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, "/v1/tier/restore?topic=t", nil)
		req.RemoteAddr = tc.remote
		n.adminAuth(ok).ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("from %s %s: %d, want %d", tc.remote, tc.method, rec.Code, tc.want)
		}
	}
}

// TestAdminHTTPSWithClientCertificates: admin.listener.security.protocol
// =SSL serves https with the ssl.* key material (listener.name.admin.ssl.*
// overriding); with client certificates requested, one whose principal is
// in super.users may restore, another principal's (same CA) or none may
// not, and the probes stay open to a client without one. Plain http gets
// nothing.
func TestAdminHTTPSWithClientCertificates(t *testing.T) {
	ca := newTestCA(t, "admin CA")
	sk, sc := ca.issue(t, pkix.Name{CommonName: "broker"})
	ok, oc := ca.issue(t, pkix.Name{CommonName: "operator"})
	xk, xc := ca.issue(t, pkix.Name{CommonName: "stranger"})
	n := startNode(t, t.TempDir(), tierSettings(map[string]string{
		"admin.listener.security.protocol":                "SSL",
		"listener.name.admin.ssl.keystore.type":           "PEM",
		"listener.name.admin.ssl.keystore.location":       writeKeystore(t, filepath.Join(t.TempDir(), "admin.pem"), sk, sc),
		"listener.name.admin.ssl.truststore.type":         "PEM",
		"listener.name.admin.ssl.truststore.certificates": string(ca.pem),
		"listener.name.admin.ssl.client.auth":             "requested",
		"super.users":                                     "User:CN=operator",
	}))
	base := "https://" + n.AdminAddr()
	client := func(key, cert []byte) *http.Client {
		return &http.Client{Timeout: testWait, Transport: &http.Transport{TLSClientConfig: clientTLS(t, ca, key, cert)}}
	}
	for _, tc := range []struct {
		name   string
		cl     *http.Client
		path   string
		method string
		want   int
	}{
		{"operator restores", client(ok, oc), "/v1/tier/restore?topic=nosuch", "POST", 404},
		{"stranger", client(xk, xc), "/v1/tier/restore?topic=nosuch", "POST", 401},
		{"no certificate", client(nil, nil), "/v1/tier/restore?topic=nosuch", "POST", 401},
		{"no certificate, probe", client(nil, nil), "/readyz", "GET", 200},
	} {
		if got := adminDo(t, tc.cl, tc.method, base, tc.path, ""); got != tc.want {
			t.Errorf("%s: %s %s: %d, want %d", tc.name, tc.method, tc.path, got, tc.want)
		}
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	if resp, err := cl.Get("http://" + n.AdminAddr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain http served by the https admin listener")
		}
	}
}

// describeBrokerConfig is broker config name as DescribeConfigs v4 on
// n's PLAINTEXT listener describes it: its value and whether it is
// sensitive; the answer must not carry secret anywhere.
func describeBrokerConfig(t *testing.T, n *Node, name string) (*string, bool) {
	t.Helper()
	c := dialRaw(t, n)
	resp := c.roundTrip(describeConfigsReq(4, true, false, configResource(kmsg.ConfigResourceTypeBroker, "1"))).(*kmsg.DescribeConfigsResponse)
	got := describedConfig(t, resp.Resources[0], name)
	if got.IsSensitive && got.ConfigType != kmsg.ConfigTypePassword {
		t.Errorf("%s: sensitive but of type %v", name, got.ConfigType)
	}
	return got.Value, got.IsSensitive
}
