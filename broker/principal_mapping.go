package broker

import (
	"fmt"
	"regexp"
	"strings"
)

// This file is ssl.principal.mapping.rules, as Kafka's SslPrincipalMapper:
// a comma-separated list of rules tried in order on a client
// certificate's subject, the distinguished name in RFC 2253 form
// ("CN=alice,OU=eng,O=example"). DEFAULT takes the whole DN;
// RULE:pattern/replacement/[L|U] applies when pattern matches the whole
// DN, giving the DN with pattern replaced (Java's replaceAll, so $1 is
// the first group), lower- or upper-cased with L or U. The first rule
// that applies names the principal; when none does, authentication fails
// (Kafka's NoMatchingRule). Pure: parsed once, applied per handshake.

// principalRule is one parsed rule.
type principalRule struct {
	isDefault bool
	pattern   *regexp.Regexp
	repl      string // Go's expansion syntax (${1})
	lower     bool
	upper     bool
	text      string
}

// principalMapper is a parsed ssl.principal.mapping.rules.
type principalMapper []principalRule

// ruleSplitter matches one rule and the comma after it, as Kafka's
// RULE_SPLITTER: DEFAULT, RULE:p/r/[LU] with \-escapes in p and r, or
// anything else (refused).
var ruleSplitter = regexp.MustCompile(`^\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,]*?|[^,]*?)\s*(?:,\s*|$)`)

// parsePrincipalRules parses ssl.principal.mapping.rules; "" is DEFAULT.
func parsePrincipalRules(s string) (principalMapper, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return principalMapper{{isDefault: true, text: "DEFAULT"}}, nil
	}
	var out principalMapper
	rest := s
	for rest != "" {
		m := ruleSplitter.FindStringSubmatchIndex(rest)
		if m == nil || m[1] == 0 {
			return nil, fmt.Errorf("invalid rule: %s", rest)
		}
		whole := rest[m[2]:m[3]]
		switch {
		case whole == "DEFAULT":
			out = append(out, principalRule{isDefault: true, text: whole})
		case strings.HasPrefix(whole, "RULE:") && m[4] >= 0:
			pat := unescapeRule(rest[m[4]:m[5]])
			re, err := regexp.Compile(pat)
			if err != nil {
				return nil, fmt.Errorf("invalid rule: %s: %v", whole, err)
			}
			flag := rest[m[8]:m[9]]
			out = append(out, principalRule{pattern: re, repl: javaReplacement(unescapeRule(rest[m[6]:m[7]])),
				lower: flag == "L", upper: flag == "U", text: whole})
		default:
			return nil, fmt.Errorf("invalid rule: %s", whole)
		}
		rest = rest[m[1]:]
	}
	return out, nil
}

// unescapeRule undoes "\/" (a slash inside a pattern or replacement).
func unescapeRule(s string) string { return strings.ReplaceAll(s, `\/`, `/`) }

// javaReplacement turns Java's $1 into Go's ${1} (Go would read "$1a" as
// the group named "1a").
func javaReplacement(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		switch {
		case r[i] == '\\' && i+1 < len(r):
			i++
			if r[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i])
			}
		case r[i] == '$' && i+1 < len(r) && r[i+1] >= '0' && r[i+1] <= '9':
			j := i + 1
			for j < len(r) && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			b.WriteString("${" + r[i+1:j] + "}")
			i = j - 1
		case r[i] == '$':
			b.WriteString("$$")
		default:
			b.WriteByte(r[i])
		}
	}
	return b.String()
}

// name maps a DN to a principal name; false when no rule applies.
func (pm principalMapper) name(dn string) (string, bool) {
	for _, r := range pm {
		if r.isDefault {
			return dn, true
		}
		loc := r.pattern.FindStringIndex(dn)
		if loc == nil || loc[0] != 0 || loc[1] != len(dn) {
			continue // Java's matches(): the whole DN
		}
		out := r.pattern.ReplaceAllString(dn, r.repl)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, true
	}
	return "", false
}
