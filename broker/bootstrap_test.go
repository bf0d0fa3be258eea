package broker

import (
	"bytes"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/broker/sasl"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage/vfs"
)

// TestParseAddScram: Kafka's --add-scram syntax (kafka-storage format,
// KIP-900), defaults, quoting, salted passwords, and refusals that never
// echo the password.
func TestParseAddScram(t *testing.T) {
	salt := base64.StdEncoding.EncodeToString([]byte("my-salt"))
	salted, _ := sasl.ScramSaltedPassword(sasl.ScramSHA512, "pw", []byte("my-salt"), 8192)
	direct, err := ParseAddScram(`SCRAM-SHA-512=[name=alice,iterations=8192,salt="`+salt+`",saltedpassword="`+base64.StdEncoding.EncodeToString(salted)+`"]`, nil)
	if err != nil {
		t.Fatal(err)
	}
	viaPass, err := ParseAddScram(`SCRAM-SHA-512=[name="alice",iterations=8192,salt="`+salt+`",password=pw]`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if direct.Name != "alice" || direct.Mechanism != metadata.ScramSHA512 || direct.Iterations != 8192 ||
		!bytes.Equal(direct.Salt, []byte("my-salt")) || !bytes.Equal(direct.StoredKey, viaPass.StoredKey) || !bytes.Equal(direct.ServerKey, viaPass.ServerKey) {
		t.Fatalf("salted and password forms differ: %+v vs %+v", direct, viaPass)
	}
	def, err := ParseAddScram(`SCRAM-SHA-256=[name=bob,password="a,b]c\"d"]`, bytes.NewReader(bytes.Repeat([]byte{7}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	if def.Iterations != 4096 || !bytes.Equal(def.Salt, bytes.Repeat([]byte{7}, 32)) {
		t.Fatalf("defaults: %+v", def)
	}
	want, _ := sasl.ScramCredentialFromPassword(sasl.ScramSHA256, `a,b]c"d`, def.Salt, 4096)
	if !bytes.Equal(def.StoredKey, want.StoredKey) {
		t.Fatal("the quoted password is not the one derived")
	}
	for _, bad := range []string{
		`SCRAM-SHA-1=[name=a,password=topsecret]`,
		`SCRAM-SHA-256=name=a,password=topsecret`,
		`SCRAM-SHA-256=[password=topsecret]`,
		`SCRAM-SHA-256=[name=a]`,
		`SCRAM-SHA-256=[name=a,password=topsecret,iterations=100]`,
		`SCRAM-SHA-256=[name=a,password=topsecret,iterations=99999]`,
		`SCRAM-SHA-256=[name=a,password=topsecret,salt=!!]`,
		`SCRAM-SHA-256=[name=a,password=topsecret,saltedpassword="AAAA",salt="AAAA"]`,
		`SCRAM-SHA-256=[name=a,saltedpassword="AAAA"]`,
		`SCRAM-SHA-256=[name=a,salt="c2FsdA==",saltedpassword=""]`,
		`SCRAM-SHA-256=[name=a,password="topsecret]`,
		`SCRAM-SHA-256=[name=a,pasword=topsecret]`,
		`SCRAM-SHA-256=[name=a,name=b,password=topsecret]`,
	} {
		_, err := ParseAddScram(bad, nil)
		if err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%s: the error shows the password: %v", bad, err)
		}
	}
}

// TestBootstrapFile: the file round-trips, damage is refused, only
// credential records are allowed, and a node that has started is not
// formatted.
func TestBootstrapFile(t *testing.T) {
	r1, _ := ParseAddScram(`SCRAM-SHA-256=[name=alice,password=a]`, nil)
	r2, _ := ParseAddScram(`SCRAM-SHA-512=[name=bob,password=b,iterations=16384]`, nil)
	b := EncodeBootstrap([]metadata.Record{r1, r2})
	recs, err := DecodeBootstrap(b)
	if err != nil || len(recs) != 2 || recs[1].(*metadata.UserScramCredentialRecord).Name != "bob" {
		t.Fatalf("round trip: %v %v", recs, err)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := DecodeBootstrap(c); err == nil {
			t.Fatalf("flip at %d accepted", i)
		}
	}
	if _, err := DecodeBootstrap(b[:len(b)-1]); err == nil {
		t.Fatal("truncation accepted")
	}
	if _, err := DecodeBootstrap(EncodeBootstrap([]metadata.Record{&metadata.NoOpRecord{}})); err == nil {
		t.Fatal("a NoOp record accepted in a bootstrap file")
	}

	fs := vfs.NewMem()
	cfg := Config{LogDir: "/data", MetadataLogDir: "/meta"}
	path, err := FormatBootstrap(fs, cfg, []metadata.Record{r1})
	if err != nil || path != filepath.Join("/meta", BootstrapFile) {
		t.Fatalf("format: %q %v", path, err)
	}
	got, err := readBootstrap(fs, "/meta")
	if err != nil || len(got) != 1 {
		t.Fatalf("read back: %v %v", got, err)
	}
	if got, err := readBootstrap(fs, "/elsewhere"); err != nil || got != nil {
		t.Fatalf("no file: %v %v", got, err)
	}
	if err := fs.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeMetaProperties(fs, "/data", 1, metaProperties{clusterID: "MkU3OEVBNTcwNTJENDM2Qk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := FormatBootstrap(fs, cfg, []metadata.Record{r2}); !errors.Is(err, ErrFormatted) {
		t.Fatalf("format of a started node: %v", err)
	}
}

// TestBootstrapCredentialsOnFirstStart: a node formatted with --add-scram
// credentials starts with them in its image (they authenticate franz-go's
// SCRAM client through the node's mechanism) without any API call.
func TestBootstrapCredentialsOnFirstStart(t *testing.T) {
	dir := t.TempDir()
	r, err := ParseAddScram(`SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FormatBootstrap(nil, Config{LogDir: dir, MetadataLogDir: dir}, []metadata.Record{r}); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, dir, authzOn(map[string]string{"super.users": "User:admin"}))
	eventually(t, "the bootstrap credential authenticates on the new cluster", func() bool {
		return scramLogin(t, n, sasl.ScramSHA512, "admin", "admin-secret")
	})
	if scramLogin(t, n, sasl.ScramSHA512, "admin", "wrong") {
		t.Fatal("a wrong password authenticates")
	}
}
