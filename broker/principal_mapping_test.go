package broker

import "testing"

func TestPrincipalMappingRules(t *testing.T) {
	for _, tc := range []struct {
		rules, dn, want string
		nomatch         bool
	}{
		{"", "CN=alice,OU=eng,O=Example,C=US", "CN=alice,OU=eng,O=Example,C=US", false},
		{"DEFAULT", "CN=alice,O=x", "CN=alice,O=x", false},
		// Kafka's documented examples.
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT`,
			"CN=kafka-server1,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "kafka-server1", false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT`,
			"CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US", "duke@javasoft", false},
		{`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U`, "O=x,cn=Bob.Smith", "BOB.SMITH", false},
		// The whole DN must match: a rule matching a part does not apply.
		{`RULE:CN=alice/x/`, "CN=alice,O=y", "", true},
		{`RULE:CN=alice/x/,DEFAULT`, "CN=alice,O=y", "CN=alice,O=y", false},
		// $1 followed by a letter is group 1 then the letter (Java's reading).
		{`RULE:^CN=([a-z]+)$/$1a/`, "CN=bob", "boba", false},
		// An escaped slash inside the pattern and the replacement.
		{`RULE:^CN=(.*)\/(.*)$/$2\/$1/`, "CN=a/b", "b/a", false},
		{`RULE:^CN=(.*)$/$1/L , DEFAULT`, "CN=MiXed", "mixed", false},
	} {
		pm, err := parsePrincipalRules(tc.rules)
		if err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		got, ok := pm.name(tc.dn)
		if ok == tc.nomatch || got != tc.want {
			t.Errorf("rules %q on %q = %q, %v; want %q, %v", tc.rules, tc.dn, got, ok, tc.want, !tc.nomatch)
		}
	}
	for _, bad := range []string{"RULE:abc", "NOPE", "RULE:(/x/", "DEFAULT,garbage"} {
		if _, err := parsePrincipalRules(bad); err == nil {
			t.Errorf("rules %q parsed; want an error", bad)
		}
	}
}
