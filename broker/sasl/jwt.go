package sasl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// jws is a parsed JWS compact serialization: header.payload.signature,
// each base64url without padding (RFC 7515 §7.1).
type jws struct {
	header      map[string]any
	claims      map[string]any
	signingIn   string // header.payload, what the signature covers
	signature   []byte
	headerAlg   string
	headerKeyID string
}

// maxTokenBytes bounds a token (the frame cap bounds it too).
const maxTokenBytes = 64 << 10

func parseJWS(token string) (*jws, error) {
	if len(token) > maxTokenBytes {
		return nil, errors.New("token too large")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("a JWS compact serialization has 3 dot-separated parts, not %d", len(parts))
	}
	j := &jws{signingIn: parts[0] + "." + parts[1]}
	dec := func(what, s string, into *map[string]any) error {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("%s is not base64url: %v", what, err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(into); err != nil || *into == nil {
			return fmt.Errorf("%s is not a JSON object", what)
		}
		if d.More() {
			return fmt.Errorf("%s has data after its JSON object", what)
		}
		return nil
	}
	if err := dec("header", parts[0], &j.header); err != nil {
		return nil, err
	}
	if err := dec("payload", parts[1], &j.claims); err != nil {
		return nil, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("signature is not base64url: %v", err)
	}
	j.signature = sig
	j.headerAlg, _ = j.header["alg"].(string)
	j.headerKeyID, _ = j.header["kid"].(string)
	return j, nil
}

// numericDate reads a NumericDate claim (seconds since the epoch, may be
// fractional); ok false when absent, an error when not a number.
func (j *jws) numericDate(name string) (t time.Time, ok bool, err error) {
	v, present := j.claims[name]
	if !present {
		return time.Time{}, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return time.Time{}, false, fmt.Errorf("claim %s is not a number", name)
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e13 {
		return time.Time{}, false, fmt.Errorf("claim %s is not a valid date", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// stringClaim reads a string claim ("" when absent or not a string).
func (j *jws) stringClaim(name string) string {
	s, _ := j.claims[name].(string)
	return s
}

// stringsClaim reads a claim that is a string or an array of strings
// (aud, scope): a string scope is space-separated (RFC 8693 §4.2).
func (j *jws) stringsClaim(name string, split bool) ([]string, error) {
	switch v := j.claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		if split {
			return strings.Fields(v), nil
		}
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("claim %s holds a non-string", name)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("claim %s is neither a string nor a list of strings", name)
	}
}

// claimRules are the checks both validators make of a token's claims.
type claimRules struct {
	PrincipalClaim string        // sub
	ScopeClaim     string        // scope
	RequiredScope  []string      // all must be granted
	ClockSkew      time.Duration // allowed either way
	Audience       []string      // one must be in aud (empty: no check)
	Issuer         string        // must equal iss (empty: no check)
}

func invalid(format string, a ...any) error {
	return &TokenError{Status: "invalid_token", Reason: fmt.Sprintf(format, a...)}
}

// check applies r to j's claims at now: exp required and not past, iat
// (when present) not in the future, the principal claim present, then
// audience, issuer and scope.
func (r claimRules) check(j *jws, now time.Time) (Token, error) {
	exp, ok, err := j.numericDate("exp")
	if err != nil {
		return Token{}, invalid("%v", err)
	}
	if !ok {
		return Token{}, invalid("no exp claim")
	}
	if !now.Before(exp.Add(r.ClockSkew)) {
		return Token{}, invalid("token expired at %v", exp.UTC())
	}
	iat, ok, err := j.numericDate("iat")
	if err != nil {
		return Token{}, invalid("%v", err)
	}
	if ok && iat.After(now.Add(r.ClockSkew)) {
		return Token{}, invalid("token issued in the future (%v)", iat.UTC())
	}
	if nbf, ok, err := j.numericDate("nbf"); err != nil {
		return Token{}, invalid("%v", err)
	} else if ok && nbf.After(now.Add(r.ClockSkew)) {
		return Token{}, invalid("token not valid before %v", nbf.UTC())
	}
	pc := r.PrincipalClaim
	if pc == "" {
		pc = "sub"
	}
	principal := strings.TrimSpace(j.stringClaim(pc))
	if principal == "" {
		return Token{}, invalid("no %s claim", pc)
	}
	if len(r.Audience) > 0 {
		aud, err := j.stringsClaim("aud", false)
		if err != nil {
			return Token{}, invalid("%v", err)
		}
		if !intersects(aud, r.Audience) {
			return Token{}, invalid("audience %q is not one expected", aud)
		}
	}
	if r.Issuer != "" && j.stringClaim("iss") != r.Issuer {
		return Token{}, invalid("issuer %q is not the one expected", j.stringClaim("iss"))
	}
	sc := r.ScopeClaim
	if sc == "" {
		sc = "scope"
	}
	scope, err := j.stringsClaim(sc, true)
	if err != nil {
		return Token{}, invalid("%v", err)
	}
	for _, want := range r.RequiredScope {
		if !intersects(scope, []string{want}) {
			return Token{}, &TokenError{Status: "insufficient_scope", Scope: r.RequiredScope, Reason: fmt.Sprintf("scope %q lacks %q", scope, want)}
		}
	}
	return Token{Principal: principal, Expiry: exp, Scope: scope}, nil
}

func intersects(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// Unsecured is Kafka's default OAUTHBEARER validator
// (OAuthBearerUnsecuredValidatorCallbackHandler): an unsecured JWS
// (alg none, empty signature) whose claims pass the rules. For
// development and tests only, as in Kafka.
type Unsecured struct {
	Rules claimRules
	Now   func() time.Time // nil: time.Now
}

// NewUnsecured builds the unsecured validator from the options of an
// OAuthBearerLoginModule JAAS entry, Kafka's names:
// unsecuredValidatorPrincipalClaimName (sub), unsecuredValidatorScopeClaimName
// (scope), unsecuredValidatorRequiredScope (comma-separated) and
// unsecuredValidatorAllowableClockSkewMs (0).
func NewUnsecured(options map[string]string) (*Unsecured, error) {
	u := &Unsecured{Rules: claimRules{
		PrincipalClaim: strings.TrimSpace(options["unsecuredValidatorPrincipalClaimName"]),
		ScopeClaim:     strings.TrimSpace(options["unsecuredValidatorScopeClaimName"]),
	}}
	for _, s := range strings.Split(options["unsecuredValidatorRequiredScope"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			u.Rules.RequiredScope = append(u.Rules.RequiredScope, s)
		}
	}
	if v := strings.TrimSpace(options["unsecuredValidatorAllowableClockSkewMs"]); v != "" {
		var ms int64
		if _, err := fmt.Sscan(v, &ms); err != nil || ms < 0 {
			return nil, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs=%q: not a non-negative integer", v)
		}
		u.Rules.ClockSkew = time.Duration(ms) * time.Millisecond
	}
	return u, nil
}

func (u *Unsecured) Validate(token string) (Token, error) {
	j, err := parseJWS(token)
	if err != nil {
		return Token{}, invalid("%v", err)
	}
	if j.headerAlg != "none" {
		return Token{}, invalid("unsecured JWS must have alg none, not %q", j.headerAlg)
	}
	if len(j.signature) != 0 {
		return Token{}, invalid("unsecured JWS must have an empty signature")
	}
	now := time.Now
	if u.Now != nil {
		now = u.Now
	}
	return u.Rules.check(j, now())
}
