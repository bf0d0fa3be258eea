package broker

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func writeSecret(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigProvidersResolve: ${file:path:key}, ${dir:path:file} and
// ${env:VAR} references are replaced before parsing, with Kafka's class
// names and KIP-993's allowed.paths; an alias config.providers does not
// list is left as written; what cannot be resolved is an error naming the
// setting and the reference, never a value.
func TestConfigProvidersResolve(t *testing.T) {
	dir := t.TempDir()
	secrets := writeSecret(t, dir, "secrets.properties", "admin.token=tok-from-file\nother=x\n")
	sdir := filepath.Join(dir, "run")
	os.Mkdir(sdir, 0o700)
	writeSecret(t, sdir, "s3-secret", "s3-from-dir")
	t.Setenv("STRATA_TEST_PROVIDED_SECRET", "from-env")
	base := map[string]string{
		"config.providers":                             "file,dir,env",
		"config.providers.file.class":                  fileProviderClass,
		"config.providers.file.param.allowed.paths":    dir,
		"config.providers.dir.class":                   dirProviderClass,
		"config.providers.env.class":                   envProviderClass,
		"config.providers.env.param.allowlist.pattern": "STRATA_TEST_.*",
	}
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	got, err := resolveConfigProviders(with(
		"admin.auth.token", "${file:"+secrets+":admin.token}",
		"remote.storage.s3.secret.key", "${dir:"+sdir+":s3-secret}",
		"remote.storage.s3.access.key", "AK-${env:STRATA_TEST_PROVIDED_SECRET}-${vault:x:y}",
	), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got["admin.auth.token"] != "tok-from-file" || got["remote.storage.s3.secret.key"] != "s3-from-dir" ||
		got["remote.storage.s3.access.key"] != "AK-from-env-${vault:x:y}" {
		t.Fatalf("resolved %v", got)
	}
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"missing key", with("admin.auth.token", "${file:"+secrets+":nope}"), "has no key nope"},
		{"missing file", with("admin.auth.token", "${file:"+dir+"/none.properties:k}"), "none.properties"},
		{"outside allowed.paths", with("admin.auth.token", "${file:/etc/hostname:k}"), "outside config.providers.file.param.allowed.paths"},
		{"relative path", with("admin.auth.token", "${dir:run:s3-secret}"), "not absolute"},
		{"dir key escapes", with("admin.auth.token", "${dir:"+sdir+":../secrets.properties}"), "not a file name"},
		{"env not allowed", with("admin.auth.token", "${env:HOME}"), "allowlist.pattern"},
		{"env unset", with("admin.auth.token", "${env:STRATA_TEST_UNSET_VAR}"), "not set"},
		{"env with a path", with("admin.auth.token", "${env:/x:STRATA_TEST_PROVIDED_SECRET}"), "no path"},
		{"no class", map[string]string{"config.providers": "file"}, "config.providers.file.class is not set"},
		{"unknown class", map[string]string{"config.providers": "v", "config.providers.v.class": "com.example.Vault"}, "want org.apache.kafka"},
		{"provider not listed", map[string]string{"config.providers.file.class": fileProviderClass}, "config.providers is empty"},
		{"param of an unknown alias", with("config.providers.x.param.allowed.paths", "/"), "does not list x"},
		{"unknown param", with("config.providers.file.param.nope", "1"), "no parameter"},
	} {
		_, err := resolveConfigProviders(tc.props, os.LookupEnv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
			continue
		}
		for _, secret := range []string{"tok-from-file", "s3-from-dir", "from-env"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows a secret: %v", tc.name, err)
			}
		}
	}
	// Through ParseConfig (so LoadConfig and `strata serve` too), and the
	// provider settings are known names.
	c, err := LoadConfig(ConfigSources{File: with("admin.auth.token", "${file:"+secrets+":admin.token}",
		"log.dirs", t.TempDir(), "admin.listener", "")})
	if err != nil || c.AdminToken != "tok-from-file" {
		t.Fatalf("LoadConfig: token %q err %v", c.AdminToken, err)
	}
}

// TestSecretsNeverInErrorsOrDescribeConfigs: a bad value of a secret is
// reported without it; password-type settings (ssl.key.password, an
// inline ssl.keystore.key, listener overrides of them, JAAS lines, the
// admin token) are sensitive of type PASSWORD in DescribeConfigs, and
// their values appear nowhere in its answer, also when a provider gave
// them.
func TestSecretsNeverInErrorsOrDescribeConfigs(t *testing.T) {
	for _, name := range []string{"ssl.key.password", "ssl.keystore.key", "listener.name.internal.ssl.key.password", "admin.auth.token",
		"remote.storage.s3.secret.key", "sasl.jaas.config", "listener.name.sasl_ssl.plain.sasl.jaas.config"} {
		if !isSensitiveSetting(name) {
			t.Errorf("%s is not sensitive", name)
		}
	}
	for _, name := range []string{"ssl.keystore.location", "admin.auth.token.file", "ssl.truststore.certificates", "super.users"} {
		if isSensitiveSetting(name) {
			t.Errorf("%s is sensitive", name)
		}
	}
	_, err := ParseConfig(MergeProperties(map[string]string{"listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\nVERYSECRETKEYBYTES\n-----END PRIVATE KEY-----"}, nil, nil))
	if err == nil || strings.Contains(err.Error(), "VERYSECRETKEYBYTES") || !strings.Contains(err.Error(), "[hidden]") {
		t.Fatalf("an inline key without its chain: %v, want an error hiding the key", err)
	}

	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	secrets := writeSecret(t, dir, "s.properties", "kp=key-password-from-file\n")
	n := sslNode(t, ca, map[string]string{
		"config.providers":            "file",
		"config.providers.file.class": fileProviderClass,
		"ssl.key.password":            "${file:" + secrets + ":kp}", // the key is not encrypted: unused, still a secret
		"admin.auth.token":            "admin-token-inline",
	})
	c := dialRaw(t, n)
	resp := c.roundTrip(describeConfigsReq(4, true, true, configResource(kmsg.ConfigResourceTypeBroker, "1"))).(*kmsg.DescribeConfigsResponse)
	for _, name := range []string{"ssl.key.password", "admin.auth.token"} {
		got := describedConfig(t, resp.Resources[0], name)
		if !got.IsSensitive || got.Value != nil || got.ConfigType != kmsg.ConfigTypePassword {
			t.Errorf("%s described as %+v", name, got)
		}
	}
	for _, secret := range []string{"key-password-from-file", "admin-token-inline"} {
		if strings.Contains(string(resp.AppendTo(nil)), secret) {
			t.Errorf("%s is in the DescribeConfigs answer", secret)
		}
	}
	if loc := describedConfig(t, resp.Resources[0], "ssl.keystore.location"); loc.ConfigType != kmsg.ConfigTypeString {
		t.Errorf("ssl.keystore.location of type %v, want STRING", loc.ConfigType)
	}
	_ = pkix.Name{}
}
