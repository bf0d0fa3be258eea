package broker

// SCRAM credentials for the SASL listeners: the node's metadata image is
// the credential store (UserScramCredentialRecord, written by
// AlterUserScramCredentials or the format-time bootstrap), read under
// metaMu at each authentication, so a credential altered through this
// broker authenticates as soon as its answer has left.

import (
	"crypto/rand"
	"sync"

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

// newScramMechanism is node n's SCRAM-SHA-256 or SCRAM-SHA-512 mechanism
// over its image, the hook (sasl_config.go's scramMechanisms) the SASL
// listeners call for each listener offering it.
//
// Unknown users' fake salts derive from one secret per process, so every
// listener of the node answers an unknown user with the same salt (two
// listeners with different ones would tell an unknown user from a known
// one). Nodes of a cluster each have their own: a client comparing two
// brokers could tell an unknown user, as it can from Kafka's immediate
// failure of one.
func newScramMechanism(n *Node, mechanism string) (sasl.Mechanism, error) {
	return sasl.NewScram(mechanism, n.scramCredentials(), sasl.WithScramFakeSecret(scramFakeSecret()))
}

func init() { scramMechanisms = newScramMechanism }

var scramFakeSecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand: never fails
	return b
})
