package broker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/sasl"
)

// SASL settings of SASL_PLAINTEXT and SASL_SSL listeners, with Kafka's
// names. Each one may be given per listener, and the per-mechanism ones
// (sasl.jaas.config, the OAUTHBEARER validator's) per listener and
// mechanism too; the most specific wins, as Kafka's
// listener.name.<l>.<mechanism>.<setting> prefixes:
//
//	listener.name.<l>.<mechanism lower>.<setting>   (per-mechanism settings)
//	listener.name.<l>.<setting>
//	<setting>

// saslListenerSettingNames may be prefixed by listener.name.<l>.
var saslListenerSettingNames = []string{
	"sasl.enabled.mechanisms", "sasl.server.max.receive.size", "connections.max.reauth.ms",
	"strata.sasl.authentication.timeout.ms",
}

// saslMechanismSettingNames may be prefixed by listener.name.<l>.<mech>.
var saslMechanismSettingNames = []string{
	"sasl.jaas.config", "sasl.server.callback.handler.class",
	"sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
	"sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
	"sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name",
}

// Mechanism names, as SaslHandshake carries them.
const (
	mechPlain       = "PLAIN"
	mechOAuthBearer = "OAUTHBEARER"
	mechScram256    = "SCRAM-SHA-256"
	mechScram512    = "SCRAM-SHA-512"
	mechGSSAPI      = "GSSAPI"
)

// knownMechanisms are the mechanisms a listener.name.<l>.<mech>. prefix
// may name (lower-cased there).
var knownMechanisms = []string{mechPlain, mechOAuthBearer, mechScram256, mechScram512, mechGSSAPI}

// saslOverrideName reports whether name is a listener (and mechanism)
// prefixed SASL setting.
func saslOverrideName(name string) bool {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return false
	}
	l, setting, ok := strings.Cut(rest, ".")
	if !ok || l == "" {
		return false
	}
	for _, s := range saslListenerSettingNames {
		if setting == s {
			return true
		}
	}
	for _, s := range saslMechanismSettingNames {
		if setting == s {
			return true
		}
	}
	for _, m := range knownMechanisms {
		if s, ok := strings.CutPrefix(setting, strings.ToLower(m)+"."); ok {
			for _, x := range saslMechanismSettingNames {
				if s == x {
					return true
				}
			}
		}
	}
	return false
}

// saslSettings are one SASL listener's settings, checked at parse time.
type saslSettings struct {
	Listener   string
	Mechanisms []string // sasl.enabled.mechanisms, upper-cased, in order
	// JAAS is each enabled mechanism's sasl.jaas.config (absent: none).
	JAAS map[string]sasl.JAAS
	// MaxReceive is sasl.server.max.receive.size: the largest frame
	// accepted before authentication.
	MaxReceive int32
	// Reauth is connections.max.reauth.ms (0: sessions do not expire).
	Reauth time.Duration
	// AuthTimeout is strata.sasl.authentication.timeout.ms: a connection
	// not authenticated this long after it opened is closed.
	AuthTimeout time.Duration
	// FailDelay is connection.failed.authentication.delay.ms (a
	// broker-wide setting, as in Kafka): a failed authentication is
	// answered, and its connection closed, this long after the failure,
	// which slows a password-guessing client down.
	FailDelay time.Duration
	// OAuth is the OAUTHBEARER validator's settings when it is enabled.
	OAuth *oauthSettings
}

// oauthSettings select and configure the OAUTHBEARER validator: the JWKS
// one when JWKSURL is set, else Kafka's unsecured one.
type oauthSettings struct {
	JWKSURL        string
	Refresh        time.Duration
	RetryBackoff   time.Duration
	RetryMax       time.Duration
	Audience       []string
	Issuer         string
	ClockSkew      time.Duration
	PrincipalClaim string
	ScopeClaim     string
}

// Kafka's OAUTHBEARER server callback handlers (its validators).
const (
	oauthValidatorHandler    = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	oauthValidatorHandlerOld = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
	oauthUnsecuredHandler    = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)

// scramMechanisms builds a SCRAM mechanism of the node for a listener;
// nil until SCRAM's credentials exist (S17d wires it): enabling
// SCRAM-SHA-* is then a configuration error.
var scramMechanisms func(n *Node, mechanism string) (sasl.Mechanism, error)

// parseSASLSettings reads listener l's SASL settings.
func parseSASLSettings(l string, props map[string]string, get func(string) string) (*saslSettings, error) {
	lower := strings.ToLower(l)
	val := func(mech, name string) string {
		if mech != "" {
			if v, ok := props["listener.name."+lower+"."+strings.ToLower(mech)+"."+name]; ok {
				return strings.TrimSpace(v)
			}
		}
		if v, ok := props["listener.name."+lower+"."+name]; ok {
			return strings.TrimSpace(v)
		}
		return get(name)
	}
	bad := func(name, v, why string) error {
		return fmt.Errorf("%w: listener %s: %s=%q: %s", ErrInvalidConfig, l, name, v, why)
	}
	msInt := func(mech, name string, min int64) (int64, error) {
		v := val(mech, name)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			return 0, bad(name, v, fmt.Sprintf("not an integer of at least %d", min))
		}
		return n, nil
	}
	s := &saslSettings{Listener: l, JAAS: map[string]sasl.JAAS{}}
	seen := map[string]bool{}
	for _, m := range strings.Split(val("", "sasl.enabled.mechanisms"), ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		switch m {
		case mechPlain, mechOAuthBearer:
		case mechScram256, mechScram512:
			if scramMechanisms == nil {
				return nil, bad("sasl.enabled.mechanisms", val("", "sasl.enabled.mechanisms"), m+" is not built yet (PLAIN and OAUTHBEARER are)")
			}
		case mechGSSAPI:
			return nil, bad("sasl.enabled.mechanisms", val("", "sasl.enabled.mechanisms"), "GSSAPI (Kerberos, Kafka's default) is not supported: enable PLAIN or OAUTHBEARER")
		default:
			return nil, bad("sasl.enabled.mechanisms", val("", "sasl.enabled.mechanisms"), "unknown mechanism "+m)
		}
		s.Mechanisms = append(s.Mechanisms, m)
	}
	if len(s.Mechanisms) == 0 {
		return nil, bad("sasl.enabled.mechanisms", val("", "sasl.enabled.mechanisms"), "a SASL listener needs at least one mechanism")
	}
	want := map[string]string{mechPlain: sasl.PlainLoginModule, mechOAuthBearer: sasl.OAuthBearerLoginModule,
		mechScram256: sasl.ScramLoginModule, mechScram512: sasl.ScramLoginModule}
	for _, m := range s.Mechanisms {
		raw := val(m, "sasl.jaas.config")
		_, prefixed := props["listener.name."+lower+"."+strings.ToLower(m)+".sasl.jaas.config"]
		if !prefixed && raw != "" {
			// The broker-wide sasl.jaas.config serves the mechanisms of
			// its own login module only (one module per value, as
			// Kafka): a PlainLoginModule there is not OAUTHBEARER's.
			if j, err := sasl.ParseJAAS(raw); err == nil && j.LoginModule != want[m] {
				raw = ""
			}
		}
		if raw == "" {
			if m == mechPlain {
				return nil, fmt.Errorf("%w: listener %s: PLAIN needs its users: set listener.name.%s.plain.sasl.jaas.config (or sasl.jaas.config) to a PlainLoginModule with user_<name>=\"<password>\" options", ErrInvalidConfig, l, lower)
			}
			continue
		}
		j, err := sasl.ParseJAAS(raw)
		if err != nil {
			// Never the value: it holds passwords.
			return nil, fmt.Errorf("%w: listener %s: %s sasl.jaas.config: %v", ErrInvalidConfig, l, m, err)
		}
		if j.LoginModule != want[m] {
			return nil, fmt.Errorf("%w: listener %s: %s sasl.jaas.config names login module %s, want %s", ErrInvalidConfig, l, m, j.LoginModule, want[m])
		}
		if m == mechPlain && len(j.PlainUsers()) == 0 {
			return nil, fmt.Errorf("%w: listener %s: PLAIN sasl.jaas.config has no user_<name>=\"<password>\" option: nobody could log in", ErrInvalidConfig, l)
		}
		s.JAAS[m] = j
	}
	n, err := msInt("", "sasl.server.max.receive.size", 1)
	if err != nil {
		return nil, err
	}
	s.MaxReceive = int32(min(n, 1<<31-1))
	if n, err = msInt("", "connections.max.reauth.ms", 0); err != nil {
		return nil, err
	}
	s.Reauth = time.Duration(min(n, int64(time.Duration(1<<62)/time.Millisecond))) * time.Millisecond
	if n, err = msInt("", "strata.sasl.authentication.timeout.ms", 1); err != nil {
		return nil, err
	}
	s.AuthTimeout = time.Duration(min(n, int64(time.Duration(1<<62)/time.Millisecond))) * time.Millisecond
	if v := strings.TrimSpace(get("connection.failed.authentication.delay.ms")); v != "" {
		d, err := strconv.ParseInt(v, 10, 64)
		if err != nil || d < 0 || d > int64(time.Hour/time.Millisecond) {
			return nil, fmt.Errorf("%w: connection.failed.authentication.delay.ms=%q: not an integer from 0 to 3600000", ErrInvalidConfig, v)
		}
		s.FailDelay = time.Duration(d) * time.Millisecond
	}
	if seen[mechOAuthBearer] {
		m := mechOAuthBearer
		o := &oauthSettings{
			JWKSURL:        val(m, "sasl.oauthbearer.jwks.endpoint.url"),
			Issuer:         val(m, "sasl.oauthbearer.expected.issuer"),
			PrincipalClaim: val(m, "sasl.oauthbearer.sub.claim.name"),
			ScopeClaim:     val(m, "sasl.oauthbearer.scope.claim.name"),
		}
		for _, a := range strings.Split(val(m, "sasl.oauthbearer.expected.audience"), ",") {
			if a = strings.TrimSpace(a); a != "" {
				o.Audience = append(o.Audience, a)
			}
		}
		if n, err = msInt(m, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 1); err != nil {
			return nil, err
		}
		o.Refresh = time.Duration(min(n, int64(time.Duration(1<<62)/time.Millisecond))) * time.Millisecond
		if n, err = msInt(m, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 1); err != nil {
			return nil, err
		}
		o.RetryBackoff = time.Duration(min(n, 1<<31)) * time.Millisecond
		if n, err = msInt(m, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 1); err != nil {
			return nil, err
		}
		o.RetryMax = time.Duration(min(n, 1<<31)) * time.Millisecond
		if n, err = msInt(m, "sasl.oauthbearer.clock.skew.seconds", 0); err != nil {
			return nil, err
		}
		o.ClockSkew = time.Duration(min(n, 1<<31)) * time.Second
		// Kafka selects the validator by its callback handler class;
		// Strata by the JWKS URL, and accepts Kafka's class names so a
		// Kafka server.properties works as is.
		switch h := val(m, "sasl.server.callback.handler.class"); h {
		case "":
		case oauthValidatorHandler, oauthValidatorHandlerOld:
			if o.JWKSURL == "" {
				return nil, bad("sasl.server.callback.handler.class", h, "the JWKS validator needs sasl.oauthbearer.jwks.endpoint.url")
			}
		case oauthUnsecuredHandler:
			if o.JWKSURL != "" {
				return nil, bad("sasl.server.callback.handler.class", h, "the unsecured validator is selected but sasl.oauthbearer.jwks.endpoint.url is set")
			}
		default:
			return nil, bad("sasl.server.callback.handler.class", h, "a Java class: only Kafka's "+oauthValidatorHandler+" (JWKS) and "+oauthUnsecuredHandler+" are built in")
		}
		if u := o.JWKSURL; u != "" && !strings.HasPrefix(u, "file:") && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, bad("sasl.oauthbearer.jwks.endpoint.url", u, "want a file:, http:// or https:// URL")
		}
		s.OAuth = o
	}
	return s, nil
}

// interBrokerSASL is how this node's inter-broker clients authenticate
// when the inter-broker listener is SASL_*: the mechanism
// (sasl.mechanism.inter.broker.protocol) and its login module's options
// (username/password; OAUTHBEARER's unsecuredLoginStringClaim_sub).
type interBrokerSASL struct {
	Mechanism string
	Options   map[string]string
}

// interBrokerSASLOf checks sasl.mechanism.inter.broker.protocol against
// the inter-broker listener's settings and returns what its clients send.
func interBrokerSASLOf(s *saslSettings, mech string) (*interBrokerSASL, error) {
	return clientSASLOf(s, mech, "sasl.mechanism.inter.broker.protocol", "the inter-broker listener", "brokers")
}

// clientSASLOf checks setting (the mechanism mech this node's own clients
// of listener s use, what being its name in messages) and returns what
// they send; who names the clients.
func clientSASLOf(s *saslSettings, mech, setting, what, who string) (*interBrokerSASL, error) {
	mech = strings.ToUpper(strings.TrimSpace(mech))
	enabled := false
	for _, m := range s.Mechanisms {
		enabled = enabled || m == mech
	}
	if !enabled {
		return nil, fmt.Errorf("%w: %s=%q is not enabled on %s %s (sasl.enabled.mechanisms %s)", ErrInvalidConfig, setting, mech, what, s.Listener, strings.Join(s.Mechanisms, ","))
	}
	j, ok := s.JAAS[mech]
	if !ok {
		return nil, fmt.Errorf("%w: %s %s has no %s sasl.jaas.config: %s need their own credentials in it", ErrInvalidConfig, what, s.Listener, mech, who)
	}
	switch mech {
	case mechPlain, mechScram256, mechScram512:
		if j.Options["username"] == "" || j.Options["password"] == "" {
			return nil, fmt.Errorf("%w: %s %s: %s sasl.jaas.config needs username and password options (the %s' own credentials)", ErrInvalidConfig, what, s.Listener, mech, who)
		}
	case mechOAuthBearer:
		if s.OAuth != nil && s.OAuth.JWKSURL != "" {
			alt := "PLAIN"
			if who == "brokers" {
				alt = "PLAIN or SCRAM between brokers"
			}
			return nil, fmt.Errorf("%w: %s %s validates OAUTHBEARER tokens with a JWKS: %s cannot obtain such tokens (use %s)", ErrInvalidConfig, what, s.Listener, who, alt)
		}
		if j.Options["unsecuredLoginStringClaim_sub"] == "" {
			return nil, fmt.Errorf("%w: %s %s: OAUTHBEARER sasl.jaas.config needs unsecuredLoginStringClaim_sub (the %s' principal)", ErrInvalidConfig, what, s.Listener, who)
		}
	}
	return &interBrokerSASL{Mechanism: mech, Options: j.Options}, nil
}

// controllerSASLOf reads a SASL_* controller listener's settings and how
// this node's connections to it authenticate
// (sasl.mechanism.controller.protocol, the listener's jaas config). SCRAM
// cannot be offered there: its credentials live in the metadata the
// quorum serves, so a node could not authenticate to form the quorum that
// holds them (Kafka documents the same limit).
func controllerSASLOf(l string, props map[string]string, get func(string) string) (*saslSettings, *interBrokerSASL, error) {
	noScram := func(what string) error {
		return fmt.Errorf("%w: controller listener %s: %s: SCRAM cannot authenticate the controller listener, its credentials live in the metadata the quorum serves (as in Kafka): use PLAIN or OAUTHBEARER", ErrInvalidConfig, l, what)
	}
	// parseSASLSettings takes SCRAM when it is built: check first.
	lower := strings.ToLower(l)
	enabled, ok := props["listener.name."+lower+".sasl.enabled.mechanisms"]
	if !ok {
		enabled = get("sasl.enabled.mechanisms")
	}
	for _, m := range strings.Split(enabled, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m == mechScram256 || m == mechScram512 {
			return nil, nil, noScram("sasl.enabled.mechanisms " + m)
		}
	}
	s, err := parseSASLSettings(l, props, get)
	if err != nil {
		return nil, nil, err
	}
	mech := strings.ToUpper(strings.TrimSpace(get("sasl.mechanism.controller.protocol")))
	switch mech {
	case mechScram256, mechScram512:
		return nil, nil, noScram("sasl.mechanism.controller.protocol " + mech)
	case mechGSSAPI:
		return nil, nil, fmt.Errorf("%w: controller listener %s is %s: set sasl.mechanism.controller.protocol to PLAIN or OAUTHBEARER (Kafka's default GSSAPI is not supported)", ErrInvalidConfig, l, strings.Join(s.Mechanisms, ","))
	}
	cl, err := clientSASLOf(s, mech, "sasl.mechanism.controller.protocol", "the controller listener", "nodes")
	if err != nil {
		return nil, nil, err
	}
	return s, cl, nil
}

// The SASL settings' Kafka types, for DescribeConfigs (the table's
// default is LONG).
func init() {
	for name, t := range map[string]kmsg.ConfigType{
		"sasl.enabled.mechanisms": kmsg.ConfigTypeList, "sasl.mechanism.inter.broker.protocol": kmsg.ConfigTypeString,
		"sasl.mechanism.controller.protocol": kmsg.ConfigTypeString,
		"sasl.jaas.config":                   kmsg.ConfigTypePassword, "sasl.server.max.receive.size": kmsg.ConfigTypeInt,
		"sasl.server.callback.handler.class": kmsg.ConfigTypeClass,
		"sasl.oauthbearer.jwks.endpoint.url": kmsg.ConfigTypeString, "sasl.oauthbearer.expected.audience": kmsg.ConfigTypeList,
		"sasl.oauthbearer.expected.issuer": kmsg.ConfigTypeString, "sasl.oauthbearer.clock.skew.seconds": kmsg.ConfigTypeInt,
		"sasl.oauthbearer.sub.claim.name": kmsg.ConfigTypeString, "sasl.oauthbearer.scope.claim.name": kmsg.ConfigTypeString,
	} {
		brokerSettingTypes[name] = t
	}
}
