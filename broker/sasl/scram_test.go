package sasl

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// memCreds is a ScramCredentials over a map, keyed by mechanism then user.
type memCreds struct {
	mu sync.Mutex
	m  map[string]map[string]ScramCredential
}

func (c *memCreds) add(t *testing.T, mech, user, pass string, salt []byte, iters int) {
	t.Helper()
	cred, err := ScramCredentialFromPassword(mech, pass, salt, iters)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]map[string]ScramCredential{}
	}
	if c.m[mech] == nil {
		c.m[mech] = map[string]ScramCredential{}
	}
	c.m[mech][user] = cred
}

func (c *memCreds) ScramCredential(user, mech string) (ScramCredential, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cred, ok := c.m[mech][user]
	return cred, ok
}

// TestScramRFC7677Vector replays RFC 7677 §3's SCRAM-SHA-256 exchange
// (user "user", password "pencil") byte for byte.
func TestScramRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	creds := &memCreds{}
	creds.add(t, ScramSHA256, "user", "pencil", salt, 4096)
	m, err := NewScram(ScramSHA256, creds)
	if err != nil {
		t.Fatal(err)
	}
	m.(*scramMech).serverNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
	s := m.Start()

	out, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: done=%v err=%v", done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(out) != want {
		t.Fatalf("server-first = %q, want %q", out, want)
	}
	if s.Principal() != "" {
		t.Fatalf("principal before the end: %q", s.Principal())
	}
	out, done, err = s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: done=%v err=%v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(out) != want {
		t.Fatalf("server-final = %q, want %q", out, want)
	}
	if s.Principal() != "user" {
		t.Fatalf("principal = %q", s.Principal())
	}
	if _, _, err := s.Step([]byte("more")); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("step after done: %v", err)
	}
}

// exchange runs franz-go's SCRAM client against a server session and
// returns the principal or the server's error.
func exchange(t *testing.T, m Mechanism, client kscram.Auth) (principal, serverFirst string, err error) {
	t.Helper()
	mech := client.AsSha256Mechanism()
	if m.Name() == ScramSHA512 {
		mech = client.AsSha512Mechanism()
	}
	cs, msg, cerr := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if cerr != nil {
		t.Fatal(cerr)
	}
	ss := m.Start()
	for i := 0; i < 4; i++ {
		out, done, serr := ss.Step(msg)
		if serr != nil {
			return "", serverFirst, serr
		}
		if i == 0 {
			serverFirst = string(out)
		}
		cdone, next, cerr := cs.Challenge(out)
		if cerr != nil {
			t.Fatalf("client rejected the server's message %q: %v", out, cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return ss.Principal(), serverFirst, nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return "", "", nil
}

// TestScramFranzGoClient authenticates franz-go's SCRAM client (the one kgo
// uses on the wire) against both mechanisms, and checks that a wrong password
// and an unknown user fail alike.
func TestScramFranzGoClient(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			creds := &memCreds{}
			creds.add(t, mech, "alice", "alice-secret", []byte("salt-alice"), 8192)
			creds.add(t, mech, "we,ird=name", "pw", []byte("salt-2"), 4096)
			m, err := NewScram(mech, creds)
			if err != nil {
				t.Fatal(err)
			}
			if m.Name() != mech {
				t.Fatalf("name %q", m.Name())
			}

			p, _, err := exchange(t, m, kscram.Auth{User: "alice", Pass: "alice-secret"})
			if err != nil || p != "alice" {
				t.Fatalf("alice: principal %q err %v", p, err)
			}
			p, _, err = exchange(t, m, kscram.Auth{User: "we,ird=name", Pass: "pw"})
			if err != nil || p != "we,ird=name" {
				t.Fatalf("escaped name: principal %q err %v", p, err)
			}
			p, _, err = exchange(t, m, kscram.Auth{User: "alice", Pass: "alice-secret", Zid: "alice"})
			if err != nil || p != "alice" {
				t.Fatalf("authzid = user: principal %q err %v", p, err)
			}

			_, _, errPass := exchange(t, m, kscram.Auth{User: "alice", Pass: "wrong"})
			_, sf1, errUser := exchange(t, m, kscram.Auth{User: "mallory", Pass: "x"})
			_, sf2, _ := exchange(t, m, kscram.Auth{User: "mallory", Pass: "y"})
			if !errors.Is(errPass, ErrAuthentication) || !errors.Is(errUser, ErrAuthentication) {
				t.Fatalf("wrong password %v, unknown user %v", errPass, errUser)
			}
			if errPass.Error() != errUser.Error() {
				t.Fatalf("the errors tell which part was wrong: %q vs %q", errPass, errUser)
			}
			if want := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech; errPass.Error() != want {
				t.Fatalf("error text %q, want Kafka's %q", errPass, want)
			}
			// The unknown user's salt is stable (a fresh random one per
			// attempt would give it away) and the iterations are plausible.
			salt := func(sf string) string {
				for _, kv := range strings.Split(sf, ",") {
					if strings.HasPrefix(kv, "s=") {
						return kv
					}
				}
				return ""
			}
			if salt(sf1) == "" || salt(sf1) != salt(sf2) || !strings.HasSuffix(sf1, ",i=4096") {
				t.Fatalf("unknown user's server-first %q then %q", sf1, sf2)
			}

			_, _, err = exchange(t, m, kscram.Auth{User: "alice", Pass: "alice-secret", IsToken: true})
			if !errors.Is(err, ErrAuthentication) {
				t.Fatalf("tokenauth accepted: %v", err)
			}
			_, _, err = exchange(t, m, kscram.Auth{User: "alice", Pass: "alice-secret", Zid: "bob"})
			if !errors.Is(err, ErrAuthentication) {
				t.Fatalf("authzid bob for alice accepted: %v", err)
			}
		})
	}
}

// TestScramMalformed feeds broken messages to each step; each fails the
// exchange with ErrAuthentication and never yields a principal.
func TestScramMalformed(t *testing.T) {
	creds := &memCreds{}
	creds.add(t, ScramSHA256, "user", "pencil", []byte("salt"), 4096)
	m, err := NewScram(ScramSHA256, creds)
	if err != nil {
		t.Fatal(err)
	}
	m.(*scramMech).serverNonce = func() (string, error) { return "SNONCE", nil }

	firsts := []string{
		"",
		"n,,",
		"p=tls-unique,,n=user,r=abc", // channel binding required: refused
		"x,,n=user,r=abc",
		"y,,n=user,r=abc", // Kafka takes only "n"
		"n,b=x,n=user,r=abc",
		"n,,r=abc,n=user",
		"n,,n=,r=abc",
		"n,,n=us=er,r=abc", // '=' must be escaped
		"n,,n=us=2,r=abc",
		"n,,n=user,r=",
		"n,,n=user,r=a\x01b",
		"n,,n=user",
	}
	for _, f := range firsts {
		s := m.Start()
		if _, _, err := s.Step([]byte(f)); !errors.Is(err, ErrAuthentication) {
			t.Errorf("client-first %q: err %v", f, err)
		}
		if s.Principal() != "" {
			t.Errorf("client-first %q: principal %q", f, s.Principal())
		}
	}

	// A good client-final to mutate: compute the proof as a client would.
	good := func() (Session, string) {
		s := m.Start()
		if _, _, err := s.Step([]byte("n,,n=user,r=CNONCE")); err != nil {
			t.Fatal(err)
		}
		ss := s.(*scramSession)
		salted, _ := ScramSaltedPassword(ScramSHA256, "pencil", []byte("salt"), 4096)
		cred, _ := ScramCredentialFromSalted(ScramSHA256, salted, []byte("salt"), 4096)
		without := "c=biws,r=CNONCESNONCE"
		am := ss.clientFirst + "," + ss.serverFirst + "," + without
		clientKey := hmacSum(m.(*scramMech).h, salted, []byte("Client Key"))
		sig := hmacSum(m.(*scramMech).h, cred.StoredKey, []byte(am))
		for i := range clientKey {
			clientKey[i] ^= sig[i]
		}
		return s, without + ",p=" + base64.StdEncoding.EncodeToString(clientKey)
	}
	s, final := good()
	if out, done, err := s.Step([]byte(final)); err != nil || !done || !bytes.HasPrefix(out, []byte("v=")) {
		t.Fatalf("good final: %q %v %v", out, done, err)
	}

	// librdkafka's client-final repeats its client nonce before the
	// combined one; Kafka accepts it (endsWith), so does this server, with
	// the proof over the nonce as sent.
	lib := func() (Session, string) {
		s := m.Start()
		if _, _, err := s.Step([]byte("n,,n=user,r=CNONCE")); err != nil {
			t.Fatal(err)
		}
		ss := s.(*scramSession)
		salted, _ := ScramSaltedPassword(ScramSHA256, "pencil", []byte("salt"), 4096)
		cred, _ := ScramCredentialFromSalted(ScramSHA256, salted, []byte("salt"), 4096)
		without := "c=biws,r=CNONCECNONCESNONCE"
		am := ss.clientFirst + "," + ss.serverFirst + "," + without
		clientKey := hmacSum(m.(*scramMech).h, salted, []byte("Client Key"))
		sig := hmacSum(m.(*scramMech).h, cred.StoredKey, []byte(am))
		for i := range clientKey {
			clientKey[i] ^= sig[i]
		}
		return s, without + ",p=" + base64.StdEncoding.EncodeToString(clientKey)
	}
	ls, lfinal := lib()
	if out, done, err := ls.Step([]byte(lfinal)); err != nil || !done || !bytes.HasPrefix(out, []byte("v=")) {
		t.Fatalf("librdkafka's final: %q %v %v", out, done, err)
	}

	mutations := map[string]func(string) string{
		"no proof":       func(f string) string { return f[:strings.LastIndex(f, ",p=")] },
		"other nonce":    func(f string) string { return strings.Replace(f, "SNONCE", "SNONCF", 1) },
		"nonce cut":      func(f string) string { return strings.Replace(f, "CNONCESNONCE", "CNONCESNONC", 1) },
		"nonce appended": func(f string) string { return strings.Replace(f, "CNONCESNONCE", "CNONCESNONCEX", 1) },
		"cbind y":        func(f string) string { return strings.Replace(f, "c=biws", "c=eSws", 1) }, // "y,," where the header was "n,,"
		"cbind not b64":  func(f string) string { return strings.Replace(f, "c=biws", "c=!!", 1) },
		"proof not b64":  func(f string) string { return f + "!" },
		"proof flipped":  func(f string) string { i := strings.LastIndex(f, ",p=") + 3; return f[:i] + "A" + f[i+1:] },
		"proof short":    func(f string) string { return f[:strings.LastIndex(f, ",p=")] + ",p=AAAA" },
		"no c attribute": func(f string) string { return strings.Replace(f, "c=biws,", "", 1) },
	}
	for name, mut := range mutations {
		s, final := good()
		bad := mut(final)
		if bad == final {
			t.Fatalf("%s: mutation changed nothing", name)
		}
		if _, done, err := s.Step([]byte(bad)); !errors.Is(err, ErrAuthentication) || done {
			t.Errorf("%s (%q): done=%v err=%v", name, bad, done, err)
		}
		if s.Principal() != "" {
			t.Errorf("%s: principal %q", name, s.Principal())
		}
	}
}

func TestScramUnescape(t *testing.T) {
	for in, want := range map[string]string{"a": "a", "a=2Cb": "a,b", "=3D=2C": "=,", "": ""} {
		if got, ok := scramUnescape(in); !ok || got != want {
			t.Errorf("%q: %q %v", in, got, ok)
		}
	}
	for _, in := range []string{"=", "=2", "=2D", "a=", "=3"} {
		if _, ok := scramUnescape(in); ok {
			t.Errorf("%q accepted", in)
		}
	}
}

// FuzzScramServer feeds two arbitrary client messages to a SCRAM-SHA-256
// session whose only user is "user" (password "pencil"), with RFC 7677's
// exchange as a seed. Invariants: Step never panics; every error wraps
// ErrAuthentication; a failed session stays failed; an exchange succeeds
// only for "user" and only with the proof of the right password (the
// fuzzer cannot forge one: success requires the seed's exact messages).
func FuzzScramServer(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"),
		[]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("n,a=user,n=user,r=x,ext=1"), []byte("c=bixhPXVzZXIs,r=x,p=AAAA"))
	f.Add([]byte("p=tls-unique,,n=user,r=x"), []byte(""))
	f.Add([]byte("n,,n=us=2Cer,r=x"), []byte("c=biws,r=x%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,e=1,p="))
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := ScramCredentialFromPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		f.Fatal(err)
	}
	creds := ScramCredentialsFunc(func(u, _ string) (ScramCredential, bool) { return cred, u == "user" })
	m, err := NewScram(ScramSHA256, creds)
	if err != nil {
		f.Fatal(err)
	}
	m.(*scramMech).serverNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s := m.Start()
		_, done, err := s.Step(first)
		if done {
			t.Fatal("done after client-first")
		}
		if err != nil {
			if !errors.Is(err, ErrAuthentication) {
				t.Fatalf("client-first error %v does not wrap ErrAuthentication", err)
			}
			if _, _, err := s.Step(final); err == nil {
				t.Fatal("a failed session went on")
			}
			return
		}
		out, done, err := s.Step(final)
		if err != nil {
			if !errors.Is(err, ErrAuthentication) || done || s.Principal() != "" {
				t.Fatalf("client-final: done %v err %v principal %q", done, err, s.Principal())
			}
			return
		}
		if !done || s.Principal() != "user" || !bytes.HasPrefix(out, []byte("v=")) {
			t.Fatalf("success: done %v principal %q out %q", done, s.Principal(), out)
		}
	})
}
