package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthcheck: 200 exits 0; 503 exits 1 and prints the failing
// checks; a refused connection and a server slower than -timeout exit 1;
// bad usage exits 2.
func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.Write([]byte("ready"))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("broker: fenced\n"))
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/readyz"
	ln.Close()

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{srv.URL + "/readyz"}, 0, ""},
		{[]string{srv.URL + "/notready"}, 1, "503 Service Unavailable: broker: fenced"},
		{[]string{refused}, 1, "connection refused"},
		{[]string{"-timeout", "200ms", srv.URL + "/slow"}, 1, "deadline exceeded"},
		{nil, 2, "usage"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
	} {
		var stderr bytes.Buffer
		start := time.Now()
		code := run(c.args, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("run(%q) = %d, %q; want %d and %q", c.args, code, stderr.String(), c.code, c.msg)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("run(%q) took %v", c.args, time.Since(start))
		}
	}
}
