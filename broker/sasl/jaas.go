package sasl

import (
	"fmt"
	"strings"
)

// JAAS is one login module entry of a Kafka sasl.jaas.config value:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required
//	    username="admin" password="admin-secret" user_admin="admin-secret";
//
// Kafka's JaasConfig grammar: a class name, a control flag (required,
// requisite, sufficient, optional), options name=value where a value is a
// bare token or a double-quoted string (with \ escapes), and a final ';'.
// Kafka allows exactly one module per sasl.jaas.config; so does ParseJAAS.
type JAAS struct {
	LoginModule string
	Flag        string
	Options     map[string]string
}

// ParseJAAS parses one sasl.jaas.config value. Errors never quote option
// values (they hold passwords).
func ParseJAAS(s string) (JAAS, error) {
	var j JAAS
	p := &jaasLexer{s: s}
	tok, quoted, err := p.next()
	if err != nil || tok == "" || quoted {
		return j, fmt.Errorf("sasl.jaas.config: expected a login module class name")
	}
	j.LoginModule = tok
	if tok, quoted, err = p.next(); err != nil || quoted {
		return j, fmt.Errorf("sasl.jaas.config: expected a control flag after %s", j.LoginModule)
	}
	switch strings.ToLower(tok) {
	case "required", "requisite", "sufficient", "optional":
		j.Flag = strings.ToLower(tok)
	default:
		return j, fmt.Errorf("sasl.jaas.config: invalid control flag %q (want required, requisite, sufficient or optional)", tok)
	}
	j.Options = map[string]string{}
	for {
		tok, quoted, err = p.next()
		if err != nil {
			return j, err
		}
		if tok == ";" && !quoted {
			break
		}
		if tok == "" {
			return j, fmt.Errorf("sasl.jaas.config: login module %s is not terminated by ';'", j.LoginModule)
		}
		name := tok
		if eq, q, err := p.next(); err != nil || q || eq != "=" {
			return j, fmt.Errorf("sasl.jaas.config: option %s: expected '='", name)
		}
		val, _, err := p.next()
		if err != nil {
			return j, fmt.Errorf("sasl.jaas.config: option %s: %v", name, err)
		}
		if val == ";" || val == "" {
			return j, fmt.Errorf("sasl.jaas.config: option %s has no value", name)
		}
		j.Options[name] = val
	}
	if rest, _, _ := p.next(); rest != "" {
		return j, fmt.Errorf("sasl.jaas.config: must contain exactly one login module")
	}
	return j, nil
}

type jaasLexer struct {
	s string
	i int
}

// next returns the next token: a word, '=', ';', or a quoted string
// (quoted=true); "" at the end.
func (l *jaasLexer) next() (tok string, quoted bool, err error) {
	for l.i < len(l.s) && strings.ContainsRune(" \t\r\n", rune(l.s[l.i])) {
		l.i++
	}
	if l.i >= len(l.s) {
		return "", false, nil
	}
	switch c := l.s[l.i]; c {
	case '=', ';':
		l.i++
		return string(c), false, nil
	case '"':
		var b strings.Builder
		for l.i++; l.i < len(l.s); l.i++ {
			switch c := l.s[l.i]; c {
			case '\\':
				if l.i+1 < len(l.s) {
					l.i++
					b.WriteByte(l.s[l.i])
				}
			case '"':
				l.i++
				return b.String(), true, nil
			default:
				b.WriteByte(c)
			}
		}
		return "", false, fmt.Errorf("unterminated quoted value")
	}
	start := l.i
	for l.i < len(l.s) && !strings.ContainsRune(" \t\r\n=;\"", rune(l.s[l.i])) {
		l.i++
	}
	return l.s[start:l.i], false, nil
}

// Login modules Kafka ships, by the mechanism they serve.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// PlainUsers returns the user table of a PlainLoginModule entry: its
// user_<name>="<password>" options.
func (j JAAS) PlainUsers() map[string]string {
	out := map[string]string{}
	for k, v := range j.Options {
		if u, ok := strings.CutPrefix(k, "user_"); ok && u != "" {
			out[u] = v
		}
	}
	return out
}
