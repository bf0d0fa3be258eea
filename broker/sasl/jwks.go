package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"sync"
	"sync/atomic"
	"time"
)

// The JWKS-validating OAUTHBEARER validator (Kafka's
// OAuthBearerValidatorCallbackHandler, KIP-768): a token is a JWS signed
// with RS256/384/512 or ES256/384/512 by a key of the key set served at
// sasl.oauthbearer.jwks.endpoint.url, its claims checked as the unsecured
// validator's plus the expected audience and issuer. The key set is
// fetched before the listener opens, again every refresh interval, and
// sooner when a token names a key id the set lacks (at most once per
// minRefetch); a failed fetch keeps the old set.

// KeySet is a parsed JWKS: signature keys by key id ("" for a key with no
// kid).
type KeySet map[string]crypto.PublicKey

// ParseJWKS parses a JWK Set document (RFC 7517 §5). Keys of other types
// or uses (enc) are skipped; a set without one usable key is an error.
func ParseJWKS(b []byte) (KeySet, error) {
	var doc struct {
		Keys []struct {
			Kty, Kid, Use, Alg string
			N, E               string
			Crv, X, Y          string
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("JWKS is not a JSON key set: %v", err)
	}
	ks := KeySet{}
	num := func(s string) (*big.Int, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, errors.New("bad base64url number")
		}
		return new(big.Int).SetBytes(b), nil
	}
	for _, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := num(k.N)
			e, err2 := num(k.E)
			if err1 != nil || err2 != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || n.BitLen() < 2048 {
				continue
			}
			ks[k.Kid] = &rsa.PublicKey{N: n, E: int(e.Int64())}
		case "EC":
			var c elliptic.Curve
			switch k.Crv {
			case "P-256":
				c = elliptic.P256()
			case "P-384":
				c = elliptic.P384()
			case "P-521":
				c = elliptic.P521()
			default:
				continue
			}
			x, err1 := num(k.X)
			y, err2 := num(k.Y)
			if err1 != nil || err2 != nil {
				continue
			}
			// Checked by building the uncompressed point the stdlib parses.
			size := (c.Params().BitSize + 7) / 8
			if len(x.Bytes()) > size || len(y.Bytes()) > size {
				continue
			}
			pt := make([]byte, 1+2*size)
			pt[0] = 4
			x.FillBytes(pt[1 : 1+size])
			y.FillBytes(pt[1+size:])
			pub, err := ecdsa.ParseUncompressedPublicKey(c, pt)
			if err != nil {
				continue
			}
			ks[k.Kid] = pub
		}
	}
	if len(ks) == 0 {
		return nil, errors.New("JWKS holds no usable signature key (RSA of 2048 bits or more, EC P-256/384/521)")
	}
	return ks, nil
}

// verify checks j's signature with the key set.
func (ks KeySet) verify(j *jws) error {
	key, ok := ks[j.headerKeyID]
	if !ok {
		if j.headerKeyID != "" || len(ks) != 1 {
			return errUnknownKey
		}
		for _, k := range ks {
			key = k
		}
	}
	var h hash.Hash
	var ch crypto.Hash
	switch j.headerAlg {
	case "RS256", "ES256":
		h, ch = sha256.New(), crypto.SHA256
	case "RS384", "ES384":
		h, ch = sha512.New384(), crypto.SHA384
	case "RS512", "ES512":
		h, ch = sha512.New(), crypto.SHA512
	default:
		return fmt.Errorf("alg %q is not accepted (RS256/384/512, ES256/384/512)", j.headerAlg)
	}
	h.Write([]byte(j.signingIn))
	sum := h.Sum(nil)
	switch k := key.(type) {
	case *rsa.PublicKey:
		if j.headerAlg[0] != 'R' {
			return fmt.Errorf("alg %s does not fit an RSA key", j.headerAlg)
		}
		if rsa.VerifyPKCS1v15(k, ch, sum, j.signature) != nil {
			return errors.New("bad signature")
		}
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		if j.headerAlg[0] != 'E' || len(j.signature) != 2*size {
			return fmt.Errorf("alg %s or signature length does not fit the EC key", j.headerAlg)
		}
		r := new(big.Int).SetBytes(j.signature[:size])
		s := new(big.Int).SetBytes(j.signature[size:])
		if !ecdsa.Verify(k, sum, r, s) {
			return errors.New("bad signature")
		}
	default:
		return errors.New("unsupported key")
	}
	return nil
}

var errUnknownKey = errors.New("the token's key id is not in the JWKS")

// JWKSConfig configures a JWKS validator, Kafka's sasl.oauthbearer.*.
type JWKSConfig struct {
	// Fetch returns the JWKS document (an HTTP GET or a file read).
	Fetch          func(ctx context.Context) ([]byte, error)
	Refresh        time.Duration // sasl.oauthbearer.jwks.endpoint.refresh.ms
	Audience       []string      // sasl.oauthbearer.expected.audience
	Issuer         string        // sasl.oauthbearer.expected.issuer
	ClockSkew      time.Duration // sasl.oauthbearer.clock.skew.seconds
	PrincipalClaim string        // sasl.oauthbearer.sub.claim.name
	ScopeClaim     string        // sasl.oauthbearer.scope.claim.name
	Now            func() time.Time
	// Log, when set, hears of failed refreshes.
	Log func(err error)
}

// JWKS is the JWKS-validating validator. Safe for concurrent use.
type JWKS struct {
	cfg     JWKSConfig
	rules   claimRules
	keys    atomic.Pointer[KeySet]
	kick    chan struct{}
	mu      sync.Mutex // guards lastGet
	lastGet time.Time
}

// minRefetch spaces the refetches an unknown key id triggers.
const minRefetch = 10 * time.Second

// NewJWKS fetches the key set once (an error if that fails: a listener
// must not open unable to check any token) and returns the validator;
// Run keeps it fresh.
func NewJWKS(ctx context.Context, cfg JWKSConfig) (*JWKS, error) {
	v := &JWKS{cfg: cfg, kick: make(chan struct{}, 1), rules: claimRules{
		PrincipalClaim: cfg.PrincipalClaim, ScopeClaim: cfg.ScopeClaim,
		ClockSkew: cfg.ClockSkew, Audience: cfg.Audience, Issuer: cfg.Issuer,
	}}
	if err := v.refresh(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *JWKS) refresh(ctx context.Context) error {
	v.mu.Lock()
	v.lastGet = v.now()
	v.mu.Unlock()
	b, err := v.cfg.Fetch(ctx)
	if err != nil {
		return fmt.Errorf("fetch JWKS: %w", err)
	}
	ks, err := ParseJWKS(b)
	if err != nil {
		return err
	}
	v.keys.Store(&ks)
	return nil
}

func (v *JWKS) now() time.Time {
	if v.cfg.Now != nil {
		return v.cfg.Now()
	}
	return time.Now()
}

// Run refreshes the key set every Refresh interval, and when a token
// named an unknown key, until ctx ends.
func (v *JWKS) Run(ctx context.Context) {
	every := v.cfg.Refresh
	if every <= 0 {
		every = time.Hour
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-v.kick:
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := v.refresh(rctx); err != nil && v.cfg.Log != nil && ctx.Err() == nil {
			v.cfg.Log(err)
		}
		cancel()
	}
}

func (v *JWKS) Validate(token string) (Token, error) {
	j, err := parseJWS(token)
	if err != nil {
		return Token{}, invalid("%v", err)
	}
	ks := *v.keys.Load()
	if err := ks.verify(j); err != nil {
		if errors.Is(err, errUnknownKey) {
			v.mu.Lock()
			due := v.now().Sub(v.lastGet) >= minRefetch
			v.mu.Unlock()
			if due {
				select {
				case v.kick <- struct{}{}:
				default:
				}
			}
		}
		return Token{}, invalid("%v", err)
	}
	return v.rules.check(j, v.now())
}
