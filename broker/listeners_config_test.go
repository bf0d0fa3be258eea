package broker

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
)

// TestListenerSecurityConfig covers listener.security.protocol.map,
// security.inter.broker.protocol and the SSL settings' checks.
func TestListenerSecurityConfig(t *testing.T) {
	ks := "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----"
	ssl := map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	ctlSASLOnly := []string{"listener.name.controller.sasl.enabled.mechanisms", "PLAIN", "sasl.mechanism.controller.protocol", "PLAIN",
		"listener.name.controller.plain.sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="ctl" password="pw" user_ctl="pw";`}
	ctlSASL := with(nil, append([]string{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"}, ctlSASLOnly...)...)
	for _, tc := range []struct {
		name    string
		props   map[string]string
		wantErr string // "" parses
		check   func(t *testing.T, c Config)
	}{
		{"default map", nil, "", func(t *testing.T, c Config) {
			for _, l := range c.Listeners {
				if l.Protocol != "PLAINTEXT" {
					t.Errorf("%s: protocol %q", l.Name, l.Protocol)
				}
			}
		}},
		{"SSL listener by its protocol's name", with(ssl, "listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0"), "", func(t *testing.T, c Config) {
			if c.Listeners[1].Protocol != "SSL" || c.TLS["SSL"] == nil || c.TLS["PLAINTEXT"] != nil {
				t.Errorf("listeners %+v tls %v", c.Listeners, c.TLS)
			}
		}},
		{"named listeners", with(ssl, "listeners", "LOCAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			"listener.security.protocol.map", "LOCAL:PLAINTEXT,EXTERNAL:SSL,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name", "INTERNAL", "advertised.listeners", "EXTERNAL://kafka.example:9093,INTERNAL://10.0.0.1:9094",
			"listener.name.internal.ssl.client.auth", "required"), "", func(t *testing.T, c Config) {
			if c.TLS["EXTERNAL"].ClientAuth != 0 || c.TLS["INTERNAL"].ClientAuth == 0 {
				t.Errorf("per-listener ssl.client.auth: EXTERNAL %v INTERNAL %v", c.TLS["EXTERNAL"].ClientAuth, c.TLS["INTERNAL"].ClientAuth)
			}
			if c.AdvertisedListeners[0].Protocol != "SSL" {
				t.Errorf("advertised %+v", c.AdvertisedListeners)
			}
			if l, _ := c.interBrokerListener(); l.Name != "INTERNAL" || l.Protocol != "SSL" {
				t.Errorf("inter-broker listener %+v", l)
			}
		}},
		{"security.inter.broker.protocol", with(ssl, "listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			"security.inter.broker.protocol", "SSL"), "", func(t *testing.T, c Config) {
			if l, _ := c.interBrokerListener(); l.Name != "SSL" {
				t.Errorf("inter-broker listener %+v", l)
			}
		}},
		{"both inter-broker settings", with(nil, "security.inter.broker.protocol", "PLAINTEXT", "inter.broker.listener.name", "PLAINTEXT"), "only one of inter.broker.listener.name and security.inter.broker.protocol", nil},
		{"unmapped listener", with(nil, "listeners", "EXTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0"), "no security protocol defined for listener EXTERNAL", nil},
		{"explicit map must name the controller", with(nil, "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT"), "no security protocol defined for listener CONTROLLER", nil},
		{"unknown protocol", with(nil, "listener.security.protocol.map", "PLAINTEXT:TLS,CONTROLLER:PLAINTEXT"), "unknown security protocol", nil},
		{"SASL with Kafka's default GSSAPI refused", with(nil, "listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0"), "GSSAPI (Kerberos, Kafka's default) is not supported", nil},
		{"controller over SSL", with(ssl, "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL", "listener.name.controller.ssl.client.auth", "required"), "", func(t *testing.T, c Config) {
			if c.ControllerProtocol != "SSL" || c.TLS["CONTROLLER"] == nil || c.TLS["CONTROLLER"].ClientAuth == 0 || c.TLS["PLAINTEXT"] != nil {
				t.Errorf("controller protocol %q tls %v", c.ControllerProtocol, c.TLS)
			}
		}},
		{"broker-only node dials an SSL controller", with(ssl, "process.roles", "broker", "listeners", "PLAINTEXT://127.0.0.1:0",
			"controller.quorum.voters", "1@127.0.0.1:9093", "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"), "", func(t *testing.T, c Config) {
			if c.ControllerProtocol != "SSL" || c.TLS["CONTROLLER"] == nil {
				t.Errorf("controller protocol %q tls %v", c.ControllerProtocol, c.TLS)
			}
		}},
		{"SASL controller: PLAIN, nodes' credentials from its jaas config", with(ctlSASL, "super.users", "User:ctl"), "", func(t *testing.T, c Config) {
			s := c.SASL["CONTROLLER"]
			if c.ControllerProtocol != "SASL_PLAINTEXT" || s == nil || strings.Join(s.Mechanisms, ",") != "PLAIN" || s.JAAS["PLAIN"].PlainUsers()["ctl"] != "pw" {
				t.Errorf("controller protocol %q sasl %+v", c.ControllerProtocol, s)
			}
			if cs := c.ControllerSASL; cs == nil || cs.Mechanism != "PLAIN" || cs.Options["username"] != "ctl" || cs.Options["password"] != "pw" {
				t.Errorf("controller client %+v", cs)
			}
			if strings.Join(c.ControllerNodes, ";") != "User:ctl" || c.TLS["CONTROLLER"] != nil {
				t.Errorf("nodes %q tls %v", c.ControllerNodes, c.TLS)
			}
		}},
		{"SASL controller with Kafka's default GSSAPI client mechanism", with(ctlSASL, "sasl.mechanism.controller.protocol", "GSSAPI"), "set sasl.mechanism.controller.protocol to PLAIN or OAUTHBEARER", nil},
		{"SASL controller: client mechanism not enabled", with(ctlSASL, "sasl.mechanism.controller.protocol", "OAUTHBEARER"), "is not enabled on the controller listener", nil},
		{"SASL controller: SCRAM refused", with(ctlSASL, "listener.name.controller.sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256"), "SCRAM cannot authenticate the controller listener", nil},
		{"SASL controller: SCRAM client refused", with(ctlSASL, "sasl.mechanism.controller.protocol", "SCRAM-SHA-512"), "SCRAM cannot authenticate the controller listener", nil},
		{"SASL controller: no own credentials", with(ctlSASL, "listener.name.controller.plain.sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required user_ctl="pw";`), "needs username and password", nil},
		{"SASL_SSL controller: TLS without forced client certificates", with(with(ssl, "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"), ctlSASLOnly...), "", func(t *testing.T, c Config) {
			if c.TLS["CONTROLLER"] == nil || c.TLS["CONTROLLER"].ClientAuth != 0 || c.SASL["CONTROLLER"] == nil || c.ControllerSASL == nil {
				t.Errorf("tls %v sasl %v client %v", c.TLS, c.SASL, c.ControllerSASL)
			}
		}},
		{"broker-only node dials a SASL controller", with(ctlSASL, "process.roles", "broker", "listeners", "PLAINTEXT://127.0.0.1:0",
			"controller.quorum.voters", "1@127.0.0.1:9093"), "", func(t *testing.T, c Config) {
			if c.ControllerSASL == nil || c.SASL["CONTROLLER"] != nil {
				t.Errorf("client %v sasl %v", c.ControllerSASL, c.SASL)
			}
		}},
		{"advertised name not a listener", with(nil, "advertised.listeners", "EXTERNAL://x:1"), "not in listeners", nil},
		{"SSL without a keystore", with(nil, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.keystore.type", "PEM"), "needs a key store", nil},
		{"JKS refused", with(nil, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.keystore.location", "/k.jks"), "only PEM", nil},
		{"location and inline key", with(ssl, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.keystore.key", ks), "not both", nil},
		{"inline key without chain", with(nil, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.keystore.type", "PEM", "ssl.keystore.key", ks), "go together", nil},
		{"bad client auth", with(ssl, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.client.auth", "yes"), "want none, requested or required", nil},
		{"TLSv1.1 refused", with(ssl, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.enabled.protocols", "TLSv1.1,TLSv1.2"), "want TLSv1.2 and/or TLSv1.3", nil},
		{"TLS 1.3 only", with(ssl, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.enabled.protocols", "TLSv1.3"), "", func(t *testing.T, c Config) {
			if s := c.TLS["SSL"]; s.MinVersion != 0x0304 || s.MaxVersion != 0x0304 {
				t.Errorf("versions %x-%x", s.MinVersion, s.MaxVersion)
			}
		}},
		{"cipher suites", with(ssl, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"), "", func(t *testing.T, c Config) {
			if s := c.TLS["SSL"]; len(s.CipherSuites) != 2 || s.CipherSuites[0] != 0xc02f {
				t.Errorf("suites %x", s.CipherSuites)
			}
		}},
		{"unknown cipher suite", with(ssl, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.cipher.suites", "TLS_RSA_WITH_NOTHING"), "unknown cipher suite", nil},
		{"bad mapping rule", with(ssl, "listeners", "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.principal.mapping.rules", "RULE:x"), "invalid rule", nil},
		{"controller over SSL: client certificates forced, nodes from super.users", with(ssl, "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
			"ssl.client.auth", "none", "ssl.truststore.type", "PEM", "ssl.truststore.location", "/ca.pem", "super.users", "User:CN=node;User:admin"), "", func(t *testing.T, c Config) {
			s := c.TLS["CONTROLLER"]
			if s.ClientAuth != tls.RequireAndVerifyClientCert || strings.Join(s.Nodes, ";") != "User:CN=node;User:admin" {
				t.Errorf("client auth %v nodes %q", s.ClientAuth, s.Nodes)
			}
		}},
		{"controller over SSL without a truststore", with(map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"},
			"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"), "verifies the nodes' client certificates", nil},
		{"override of an unknown ssl name", with(nil, "listener.name.ssl.ssl.keystore.nope", "x"), "unknown setting", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(MergeProperties(tc.props, nil, nil))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.check != nil {
					tc.check(t, c)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
