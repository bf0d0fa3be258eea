package broker

// Principal is who a connection speaks for, as Kafka's KafkaPrincipal:
// a type ("User") and a name. A PLAINTEXT connection is User:ANONYMOUS;
// TLS with a client certificate (ssl.principal.mapping.rules) and SASL
// set it at authentication (issue 17); the authorizer decides on it.
type Principal struct {
	Type, Name string
}

// Anonymous is the principal of an unauthenticated connection.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// String is Kafka's form, "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }
