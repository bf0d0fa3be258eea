// Package pemkey loads a TLS key pair from PEM as Kafka's PEM key stores
// hold it: a private key (PKCS#8, PKCS#1 or SEC 1, or an encrypted PKCS#8
// ENCRYPTED PRIVATE KEY with its password, ssl.key.password) and its
// certificate chain. The broker's SSL listeners and the CLI's client
// security (internal/clientsec) share it. No I/O: the caller reads the
// files.
package pemkey

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// LoadKeyPair reads a private key (PKCS#8, PKCS#1 or SEC 1; an
// ENCRYPTED PRIVATE KEY decrypted with password) from keyPEM and the
// certificate chain from chainPEM, and checks that they belong together.
func LoadKeyPair(keyPEM, chainPEM []byte, password string) (tls.Certificate, error) {
	var keyDER []byte
	var keyType string
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			if _, legacy := b.Headers["Proc-Type"]; legacy {
				return tls.Certificate{}, errors.New("a legacy (OpenSSL Proc-Type) encrypted key: convert it to encrypted PKCS#8 with openssl pkcs8 -topk8 -v2 aes-256-cbc")
			}
			keyDER, keyType = b.Bytes, b.Type
			break
		}
	}
	if keyDER == nil {
		return tls.Certificate{}, errors.New("no PEM private key")
	}
	if keyType == "ENCRYPTED PRIVATE KEY" {
		if password == "" {
			return tls.Certificate{}, errors.New("the private key is encrypted and ssl.key.password is not set")
		}
		der, err := decryptPKCS8(keyDER, password)
		if err != nil {
			return tls.Certificate{}, err
		}
		keyDER, keyType = der, "PRIVATE KEY"
	}
	var chain bytes.Buffer
	for rest := chainPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			pem.Encode(&chain, b)
		}
	}
	if chain.Len() == 0 {
		return tls.Certificate{}, errors.New("no PEM certificate")
	}
	return tls.X509KeyPair(chain.Bytes(), pem.EncodeToMemory(&pem.Block{Type: keyType, Bytes: keyDER}))
}

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

type pkixAlgorithm struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm pkixAlgorithm
	Data      []byte
}

type pbes2Params struct {
	KDF pkixAlgorithm
	Enc pkixAlgorithm
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int           `asn1:"optional"`
	PRF        pkixAlgorithm `asn1:"optional"`
}

// decryptPKCS8 decrypts a PKCS#8 EncryptedPrivateKeyInfo with PBES2
// (PBKDF2 with HMAC-SHA1/256/384/512; AES-128/192/256-CBC or
// DES-EDE3-CBC): what `openssl pkcs8 -topk8` and Kafka's PEM key stores
// use. It returns the PKCS#8 PrivateKeyInfo.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("encrypted private key: %v", err)
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key: scheme %v is not PBES2 (re-encrypt with openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algorithm.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBES2 parameters: %v", err)
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted private key: key derivation %v is not PBKDF2", p.KDF.Algorithm)
	}
	var kp pbkdf2Params
	if _, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kp); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBKDF2 parameters: %v", err)
	}
	var h func() hash.Hash
	switch prf := kp.PRF.Algorithm; {
	case len(prf) == 0 || prf.Equal(oidHMACSHA1):
		h = sha1.New
	case prf.Equal(oidHMACSHA256):
		h = sha256.New
	case prf.Equal(oidHMACSHA384):
		h = sha512.New384
	case prf.Equal(oidHMACSHA512):
		h = sha512.New
	default:
		return nil, fmt.Errorf("encrypted private key: PBKDF2 PRF %v not supported", prf)
	}
	var keyLen int
	var newCipher func([]byte) (cipher.Block, error)
	switch e := p.Enc.Algorithm; {
	case e.Equal(oidAES128CBC):
		keyLen, newCipher = 16, aes.NewCipher
	case e.Equal(oidAES192CBC):
		keyLen, newCipher = 24, aes.NewCipher
	case e.Equal(oidAES256CBC):
		keyLen, newCipher = 32, aes.NewCipher
	case e.Equal(oidDESEDE3CBC):
		keyLen, newCipher = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("encrypted private key: cipher %v not supported", e)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.Enc.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("encrypted private key: IV: %v", err)
	}
	key, err := pbkdf2.Key(h, password, kp.Salt, kp.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("encrypted private key: %v", err)
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	if len(iv) != bs || len(info.Data) == 0 || len(info.Data)%bs != 0 {
		return nil, errors.New("encrypted private key: bad IV or data length")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errors.New("encrypted private key: wrong ssl.key.password (or a corrupt key)")
	}
	out = out[:len(out)-pad]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, errors.New("encrypted private key: wrong ssl.key.password (or a corrupt key)")
	}
	return out, nil
}
