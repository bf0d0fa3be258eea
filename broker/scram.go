package broker

// SCRAM credentials for the SASL listeners: the node's metadata image is
// the credential store (UserScramCredentialRecord, written by
// AlterUserScramCredentials or the format-time bootstrap), read under
// metaMu at each authentication, so a credential altered through this
// broker authenticates as soon as its answer has left.

import (
	"github.com/strata-io/strata/broker/sasl"
	"github.com/strata-io/strata/controller/metadata"
)

// scramCredentials is the node's image as a sasl.ScramCredentials.
func (n *Node) scramCredentials() sasl.ScramCredentials {
	return sasl.ScramCredentialsFunc(func(user, mech string) (sasl.ScramCredential, bool) {
		m := metadata.ScramMechanismByName(mech)
		if m == metadata.ScramUnknown {
			return sasl.ScramCredential{}, false
		}
		var c sasl.ScramCredential
		var ok bool
		n.view(func(st *metadata.State) { c, ok = st.ScramCredential(user, m) })
		return c, ok
	})
}

// scramMechanisms returns the SCRAM mechanisms over the node's image, by
// name, for the SASL framework to offer where sasl.enabled.mechanisms
// lists them. Each has its own secret for unknown users' salts, so build
// them once per node, not per connection.
func (n *Node) scramMechanisms() (map[string]sasl.Mechanism, error) {
	out := map[string]sasl.Mechanism{}
	for _, name := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
		m, err := sasl.NewScram(name, n.scramCredentials())
		if err != nil {
			return nil, err
		}
		out[name] = m
	}
	return out, nil
}
