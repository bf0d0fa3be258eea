package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/sasl"
)

// TestSASLConfig covers the SASL settings' parsing and checks: Kafka's
// names, listener and listener+mechanism prefixes, the jaas config, the
// inter-broker mechanism, and the refusals.
func TestSASLConfig(t *testing.T) {
	const jaasUsers = `org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="bp" user_b="bp" user_alice="ap";`
	base := map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,AUTH://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,AUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":     "PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN",
	}
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "-" {
				delete(out, kv[i])
				continue
			}
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		props   map[string]string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{"PLAIN users from listener.name.<l>.plain.sasl.jaas.config", with("listener.name.auth.plain.sasl.jaas.config", jaasUsers), "", func(t *testing.T, c Config) {
			s := c.SASL["AUTH"]
			if s == nil || strings.Join(s.Mechanisms, ",") != "PLAIN" || s.JAAS["PLAIN"].PlainUsers()["alice"] != "ap" || s.MaxReceive != 524288 || s.Reauth != 0 {
				t.Fatalf("%+v", s)
			}
			if c.SASL["PLAINTEXT"] != nil || c.InterBrokerSASL != nil {
				t.Fatalf("SASL on PLAINTEXT: %+v %+v", c.SASL, c.InterBrokerSASL)
			}
		}},
		{"broker-wide sasl.jaas.config, listener overrides", with("sasl.jaas.config", jaasUsers,
			"listener.name.auth.sasl.enabled.mechanisms", "OAUTHBEARER, PLAIN", "sasl.enabled.mechanisms", "-",
			"listener.name.auth.connections.max.reauth.ms", "60000", "connections.max.reauth.ms", "1000",
			"listener.name.auth.sasl.server.max.receive.size", "1000",
			"listener.name.auth.oauthbearer.sasl.oauthbearer.expected.audience", "a, b"), "", func(t *testing.T, c Config) {
			s := c.SASL["AUTH"]
			if strings.Join(s.Mechanisms, ",") != "OAUTHBEARER,PLAIN" || s.Reauth != time.Minute || s.MaxReceive != 1000 ||
				s.OAuth == nil || strings.Join(s.OAuth.Audience, "|") != "a|b" || s.OAuth.ClockSkew != 30*time.Second || s.OAuth.JWKSURL != "" {
				t.Fatalf("%+v %+v", s, s.OAuth)
			}
		}},
		{"inter-broker PLAIN", with("inter.broker.listener.name", "AUTH", "sasl.mechanism.inter.broker.protocol", "PLAIN", "sasl.jaas.config", jaasUsers), "", func(t *testing.T, c Config) {
			if ib := c.InterBrokerSASL; ib == nil || ib.Mechanism != "PLAIN" || ib.Options["username"] != "b" || ib.Options["password"] != "bp" {
				t.Fatalf("%+v", c.InterBrokerSASL)
			}
		}},
		{"inter-broker with Kafka's default GSSAPI", with("inter.broker.listener.name", "AUTH", "sasl.jaas.config", jaasUsers), "sasl.mechanism.inter.broker.protocol=\"GSSAPI\" is not enabled", nil},
		{"inter-broker without a username", with("inter.broker.listener.name", "AUTH", "sasl.mechanism.inter.broker.protocol", "PLAIN",
			"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required user_b="bp";`), "needs username and password", nil},
		{"PLAIN without users", with(), "PLAIN needs its users", nil},
		{"PLAIN jaas without user_ entries", with("sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="x";`), "nobody could log in", nil},
		{"jaas of another login module", with("listener.name.auth.plain.sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required;`), "want org.apache.kafka.common.security.plain.PlainLoginModule", nil},
		{"broker-wide jaas of another module is not PLAIN's", with("sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required;`), "PLAIN needs its users", nil},
		{"bad jaas does not echo secrets", with("sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required user_b="hunter2"`), "not terminated by ';'", func(t *testing.T, c Config) {}},
		{"SCRAM needs no jaas users", with("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512"), "", func(t *testing.T, c Config) {
			if s := c.SASL["AUTH"]; s == nil || strings.Join(s.Mechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512" {
				t.Fatalf("%+v", s)
			}
		}},
		{"unknown mechanism", with("sasl.enabled.mechanisms", "PLAIN,FOO", "sasl.jaas.config", jaasUsers), "unknown mechanism FOO", nil},
		{"no mechanism", with("sasl.enabled.mechanisms", " "), "at least one mechanism", nil},
		{"bad reauth", with("sasl.jaas.config", jaasUsers, "connections.max.reauth.ms", "-1"), "connections.max.reauth.ms", nil},
		{"bad JWKS URL", with("sasl.enabled.mechanisms", "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url", "ftp://x/jwks"), "want a file:, http:// or https:// URL", nil},
		{"Kafka's JWKS validator class", with("sasl.enabled.mechanisms", "OAUTHBEARER",
			"listener.name.auth.oauthbearer.sasl.server.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
			"listener.name.auth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url", "https://idp.example/jwks"), "", func(t *testing.T, c Config) {
			if c.SASL["AUTH"].OAuth.JWKSURL != "https://idp.example/jwks" {
				t.Fatalf("%+v", c.SASL["AUTH"].OAuth)
			}
		}},
		{"JWKS validator class without a URL", with("sasl.enabled.mechanisms", "OAUTHBEARER",
			"listener.name.auth.oauthbearer.sasl.server.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"), "needs sasl.oauthbearer.jwks.endpoint.url", nil},
		{"a custom callback handler", with("sasl.enabled.mechanisms", "OAUTHBEARER", "sasl.server.callback.handler.class", "com.example.MyHandler"), "a Java class", nil},
		{"SASL_SSL needs a key store", with("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,AUTH:SASL_SSL,CONTROLLER:PLAINTEXT", "sasl.jaas.config", jaasUsers), "only PEM key stores", nil},
		{"failed authentication delay", with("sasl.jaas.config", jaasUsers, "connection.failed.authentication.delay.ms", "250"), "", func(t *testing.T, c Config) {
			if c.SASL["AUTH"].FailDelay != 250*time.Millisecond {
				t.Fatalf("FailDelay %v", c.SASL["AUTH"].FailDelay)
			}
		}},
		{"negative failed authentication delay", with("sasl.jaas.config", jaasUsers, "connection.failed.authentication.delay.ms", "-1"), "connection.failed.authentication.delay.ms", nil},
		{"unknown prefixed name", with("sasl.jaas.config", jaasUsers, "listener.name.auth.plain.sasl.jaas.konfig", "x"), "unknown setting", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(MergeProperties(tc.props, nil, nil))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, c)
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "bp") {
				t.Fatalf("error shows a password: %v", err)
			}
		})
	}
	if !knownName("listener.name.auth.plain.sasl.jaas.config") || !knownName("listener.name.x.oauthbearer.sasl.oauthbearer.jwks.endpoint.url") ||
		!knownName("listener.name.x.connections.max.reauth.ms") || !knownName("sasl.mechanism.controller.protocol") {
		t.Fatal("a prefixed SASL name is unknown")
	}
}

// TestSASLJAASSensitive: sasl.jaas.config holds passwords: DescribeConfigs
// says it is set and sensitive, never its value.
func TestSASLJAASSensitive(t *testing.T) {
	n := saslNode(t, nil)
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	rr.ConfigNames = []string{"sasl.jaas.config", "sasl.enabled.mechanisms"}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), newClient(t, n))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range resp.Resources[0].Configs {
		switch c.Name {
		case "sasl.jaas.config":
			seen++
			if !c.IsSensitive || c.Value != nil || c.ConfigType != kmsg.ConfigTypePassword {
				t.Fatalf("sasl.jaas.config: sensitive %v value %v type %v", c.IsSensitive, c.Value, c.ConfigType)
			}
		case "sasl.enabled.mechanisms":
			seen++
			if c.Value == nil || *c.Value != "PLAIN,OAUTHBEARER" || c.ConfigType != kmsg.ConfigTypeList {
				t.Fatalf("sasl.enabled.mechanisms %v", c.Value)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("configs %+v", resp.Resources[0].Configs)
	}
}

// TestSASLInterBrokerOAuthToken: the inter-broker clients' OAUTHBEARER
// token (Kafka's unsecured login: unsecuredLoginStringClaim_sub,
// unsecuredLoginLifetimeSeconds) passes the listener's unsecured
// validator as its sub, and expires when it says.
func TestSASLInterBrokerOAuthToken(t *testing.T) {
	c, err := ParseConfig(MergeProperties(map[string]string{
		"listeners":                            "PLAINTEXT://127.0.0.1:0,AUTH://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":       "PLAINTEXT:PLAINTEXT,AUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":           "AUTH",
		"sasl.enabled.mechanisms":              "OAUTHBEARER",
		"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
		"listener.name.auth.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
			unsecuredLoginStringClaim_sub="broker" unsecuredLoginLifetimeSeconds="60";`,
	}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	ib := c.InterBrokerSASL
	if ib == nil || ib.Mechanism != "OAUTHBEARER" {
		t.Fatalf("%+v", ib)
	}
	v, err := sasl.NewUnsecured(c.SASL["AUTH"].JAAS["OAUTHBEARER"].Options)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := v.Validate(unsecuredLoginToken(ib.Options, now))
	if err != nil || tok.Principal != "broker" || tok.Expiry.Unix() != now.Unix()+60 {
		t.Fatalf("token: %+v %v", tok, err)
	}
	if _, err := v.Validate(unsecuredLoginToken(ib.Options, now.Add(-time.Hour))); err == nil {
		t.Fatal("an hour-old token passed")
	}
	// A JWKS-validating inter-broker listener: brokers have no way to get a token.
	_, err = ParseConfig(MergeProperties(map[string]string{
		"listeners":                                       "PLAINTEXT://127.0.0.1:0,AUTH://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                  "PLAINTEXT:PLAINTEXT,AUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":                      "AUTH",
		"sasl.enabled.mechanisms":                         "OAUTHBEARER",
		"sasl.mechanism.inter.broker.protocol":            "OAUTHBEARER",
		"sasl.oauthbearer.jwks.endpoint.url":              "file:///nonexistent",
		"listener.name.auth.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`,
	}, nil, nil))
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "JWKS") {
		t.Fatalf("JWKS inter-broker listener: %v", err)
	}
}
