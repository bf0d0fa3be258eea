package broker

// Format-time bootstrap records, as Kafka's `kafka-storage format
// --add-scram` (KIP-900): `strata format` writes the SCRAM credentials a
// new cluster starts with into <metadata.log.dir>/bootstrap.records, and
// the first controller leader of the cluster commits them with the
// cluster id (controller.Options.Bootstrap), so a cluster with an
// authorizer gets its first (super) user without the API. The file holds
// only what the records hold (salt, StoredKey, ServerKey, iterations),
// never a password. Once the cluster has formed the file is inert: later
// leaders never commit it again, and `strata format` refuses a node that
// has started (its meta.properties exists).
//
// Why a format step and not a setting: operators' scripts already run
// `kafka-storage format --add-scram` with this syntax; the password is
// consumed once and never sits in server.properties; and the credential
// enters the metadata log once, when the quorum forms, as in KRaft.
//
// File layout (all integers big-endian):
//
//	+-----------+---------+------------------+-----------------------------+
//	| "SBRC" 4B | version | crc32c (Castagn.)| body: metadata.EncodeBatch  |
//	|           | uint8=1 | uint32, of body  | (UserScramCredential only)  |
//	+-----------+---------+------------------+-----------------------------+

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-io/strata/broker/sasl"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// BootstrapFile is the bootstrap records file in metadata.log.dir.
const BootstrapFile = "bootstrap.records"

const (
	bootstrapMagic   = "SBRC"
	bootstrapVersion = 1
	bootstrapHeader  = len(bootstrapMagic) + 1 + 4
	bootstrapMaxSize = 16 << 20
)

var bootstrapCRC = crc32.MakeTable(crc32.Castagnoli)

// EncodeBootstrap returns the bootstrap file's bytes for recs.
func EncodeBootstrap(recs []metadata.Record) []byte {
	body := metadata.EncodeBatch(recs)
	b := make([]byte, bootstrapHeader, bootstrapHeader+len(body))
	copy(b, bootstrapMagic)
	b[len(bootstrapMagic)] = bootstrapVersion
	binary.BigEndian.PutUint32(b[len(bootstrapMagic)+1:], crc32.Checksum(body, bootstrapCRC))
	return append(b, body...)
}

// DecodeBootstrap parses a bootstrap file: its records, each one Decode
// validates (a credential record with keys of its mechanism's size and
// iterations in range), and only record types a bootstrap may carry.
func DecodeBootstrap(b []byte) ([]metadata.Record, error) {
	if len(b) < bootstrapHeader || string(b[:len(bootstrapMagic)]) != bootstrapMagic {
		return nil, errors.New("not a bootstrap records file")
	}
	if v := b[len(bootstrapMagic)]; v != bootstrapVersion {
		return nil, fmt.Errorf("bootstrap records version %d", v)
	}
	body := b[bootstrapHeader:]
	if crc32.Checksum(body, bootstrapCRC) != binary.BigEndian.Uint32(b[len(bootstrapMagic)+1:]) {
		return nil, errors.New("bootstrap records checksum mismatch")
	}
	recs, err := metadata.DecodeBatch(body)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if _, ok := r.(*metadata.UserScramCredentialRecord); !ok {
			return nil, fmt.Errorf("bootstrap records may not hold a %s record", r.Type())
		}
	}
	return recs, nil
}

// readBootstrap returns the records of dir's bootstrap file, none when
// there is no file.
func readBootstrap(fs vfs.FS, dir string) ([]metadata.Record, error) {
	path := filepath.Join(dir, BootstrapFile)
	b, err := vfs.ReadFile(fs, path, bootstrapMaxSize)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: read %s: %w", path, err)
	}
	recs, err := DecodeBootstrap(b)
	if err != nil {
		return nil, fmt.Errorf("broker: %s: %w: %v", path, ErrInvalidConfig, err)
	}
	return recs, nil
}

// ErrFormatted is returned by [FormatBootstrap] for a node that has
// started already.
var ErrFormatted = errors.New("broker: the node has already started")

// FormatBootstrap writes recs as the bootstrap file of cfg's node (in
// metadata.log.dir, created if missing), replacing an earlier one; it
// refuses, with ErrFormatted, a node whose meta.properties exists (its
// cluster formed without them: use AlterUserScramCredentials, `strata user
// create`). It returns the file's path.
func FormatBootstrap(fs vfs.FS, cfg Config, recs []metadata.Record) (string, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if _, ok, err := storage.ReadMetaProperties(fs, cfg.LogDir); err != nil {
		return "", err
	} else if ok {
		return "", fmt.Errorf("%w: %s exists (the cluster formed without the bootstrap records; add users with `strata user create`)",
			ErrFormatted, filepath.Join(cfg.LogDir, storage.MetaPropertiesFile))
	}
	if err := fs.MkdirAll(cfg.MetadataLogDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(cfg.MetadataLogDir, BootstrapFile)
	if err := vfs.WriteFileAtomic(fs, path, EncodeBootstrap(recs)); err != nil {
		return "", err
	}
	return path, nil
}

// ParseAddScram parses one --add-scram argument in Kafka's syntax
// (kafka-storage format, KIP-900):
//
//	SCRAM-SHA-256=[name=alice,password=alice-secret]
//	SCRAM-SHA-512=[name=alice,iterations=8192,salt="c2FsdA==",saltedpassword="..."]
//
// Values may be double-quoted (a password holding ',' or ']' must be).
// iterations defaults to 4096; salt (base64) to 32 random bytes from rnd;
// saltedpassword (base64, Hi(password, salt, iterations)) replaces
// password. It returns the credential record, validated as the
// controller's planner validates an upsertion.
func ParseAddScram(spec string, rnd io.Reader) (*metadata.UserScramCredentialRecord, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	mechName, rest, ok := strings.Cut(spec, "=")
	mech := metadata.ScramMechanismByName(strings.TrimSpace(mechName))
	if !ok || mech == metadata.ScramUnknown {
		return nil, fmt.Errorf("--add-scram %q: want SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...]", redactScramSpec(spec))
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return nil, fmt.Errorf("--add-scram for %s: want [name=...,password=...]", mech)
	}
	kv, err := parseScramAttrs(rest[1 : len(rest)-1])
	if err != nil {
		return nil, fmt.Errorf("--add-scram for %s: %v", mech, err)
	}
	name := kv["name"]
	if name == "" {
		return nil, fmt.Errorf("--add-scram for %s: name is required", mech)
	}
	iters := int64(sasl.ScramMinIterations)
	if v, ok := kv["iterations"]; ok {
		if iters, err = strconv.ParseInt(v, 10, 32); err != nil {
			return nil, fmt.Errorf("--add-scram for %s user %s: iterations %q", mech, name, v)
		}
	}
	if iters < sasl.ScramMinIterations || iters > sasl.ScramMaxIterations {
		return nil, fmt.Errorf("--add-scram for %s user %s: iterations %d outside %d..%d", mech, name, iters, sasl.ScramMinIterations, sasl.ScramMaxIterations)
	}
	var salt []byte
	if v, ok := kv["salt"]; ok {
		if salt, err = base64.StdEncoding.DecodeString(v); err != nil || len(salt) == 0 {
			return nil, fmt.Errorf("--add-scram for %s user %s: salt must be base64", mech, name)
		}
	} else {
		salt = make([]byte, 32)
		if _, err := io.ReadFull(rnd, salt); err != nil {
			return nil, err
		}
	}
	pass, hasPass := kv["password"]
	salted64, hasSalted := kv["saltedpassword"]
	var salted []byte
	switch {
	case hasPass && hasSalted:
		return nil, fmt.Errorf("--add-scram for %s user %s: password and saltedpassword are exclusive", mech, name)
	case hasSalted:
		if _, ok := kv["salt"]; !ok {
			return nil, fmt.Errorf("--add-scram for %s user %s: saltedpassword needs its salt", mech, name)
		}
		if salted, err = base64.StdEncoding.DecodeString(salted64); err != nil {
			return nil, fmt.Errorf("--add-scram for %s user %s: saltedpassword must be base64", mech, name)
		}
	case hasPass && pass != "":
		if salted, err = sasl.ScramSaltedPassword(mech.String(), pass, salt, int(iters)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("--add-scram for %s user %s: password (or salt and saltedpassword) is required", mech, name)
	}
	st := metadata.NewState()
	recs, res := st.PlanAlterUserScramCredentials(nil, []metadata.ScramUpsertion{{Name: name, Mechanism: mech,
		Iterations: int32(iters), Salt: salt, SaltedPassword: salted}})
	if res[0].Err != nil {
		return nil, fmt.Errorf("--add-scram for %s user %s: %v", mech, name, res[0].Err)
	}
	return recs[0].(*metadata.UserScramCredentialRecord), nil
}

// parseScramAttrs splits k=v,k="v",... with double quotes protecting ','
// and ']' (and \" inside quotes).
func parseScramAttrs(s string) (map[string]string, error) {
	out := map[string]string{}
	for len(s) > 0 {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("attribute %q without '='", k)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		var v string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return nil, fmt.Errorf("unterminated quote in %s", k)
			}
			v, rest = b.String(), rest[i+1:]
			if rest != "" && !strings.HasPrefix(rest, ",") {
				return nil, fmt.Errorf("text after the quoted %s", k)
			}
			rest = strings.TrimPrefix(rest, ",")
		} else {
			v, rest, _ = strings.Cut(rest, ",")
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s given twice", k)
		}
		switch k {
		case "name", "password", "iterations", "salt", "saltedpassword":
		default:
			return nil, fmt.Errorf("unknown attribute %q", k)
		}
		out[k] = v
		s = rest
	}
	return out, nil
}

// redactScramSpec is spec without what follows "password=", for errors.
func redactScramSpec(spec string) string {
	if i := strings.Index(strings.ToLower(spec), "password="); i >= 0 {
		return spec[:i+len("password=")] + "<redacted>"
	}
	return spec
}
