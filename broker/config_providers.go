package broker

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/strata-io/strata/internal/props"
	"github.com/strata-io/strata/storage/vfs"
)

// Config providers (Kafka's KIP-297/KIP-421): a setting's value may hold
// ${alias:path:key} or ${alias:key} references that are replaced, before
// the configuration is parsed, by what the provider of that alias finds,
// so a secret (ssl.key.password, a JAAS line, admin.auth.token, the S3
// secret key) lives in a file of its own instead of server.properties:
//
//	config.providers=file,dir,env
//	config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
//	config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
//	config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
//	ssl.key.password=${file:/etc/strata/secrets.properties:key.password}
//	admin.auth.token=${dir:/run/secrets:admin-token}
//	remote.storage.s3.secret.key=${env:S3_SECRET}
//
// FileConfigProvider reads key from the properties file at path;
// DirectoryConfigProvider the whole content of the file named key in the
// directory path; EnvVarConfigProvider the environment variable key (no
// path). config.providers.<alias>.param.allowed.paths (file and dir, KIP-993)
// restricts the paths to those under the listed directories, and
// config.providers.<alias>.param.allowlist.pattern (env) the variables to
// those the regular expression matches whole.
//
// As Kafka, a reference to an alias that config.providers does not list is
// left as written. Unlike Kafka, which also leaves a reference it cannot
// resolve as written, a missing file, key or variable is an error: a
// secret silently taken as the literal "${file:...}" only fails later and
// further from its cause. Errors name the setting, the path and the key,
// never a value.

// Kafka's provider classes.
const (
	fileProviderClass = "org.apache.kafka.common.config.provider.FileConfigProvider"
	dirProviderClass  = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
	envProviderClass  = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
)

// configVarPattern is Kafka's ConfigTransformer pattern: ${provider:[path:]key}.
var configVarPattern = regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`)

// maxProvidedFile bounds a file a provider reads.
const maxProvidedFile = 1 << 20

// isConfigProviderName reports whether name configures a provider:
// config.providers.<alias>.class or config.providers.<alias>.param.<p>.
func isConfigProviderName(name string) bool {
	rest, ok := strings.CutPrefix(name, "config.providers.")
	if !ok {
		return false
	}
	alias, sub, ok := strings.Cut(rest, ".")
	return ok && alias != "" && (sub == "class" || strings.HasPrefix(sub, "param.") && len(sub) > len("param."))
}

// configProvider resolves one alias's references.
type configProvider struct {
	alias, class string
	allowed      []string       // allowed.paths, cleaned; nil: any
	allowlist    *regexp.Regexp // env: allowlist.pattern; nil: any
	files        map[string]map[string]string
}

// resolveConfigProviders returns p with every provider reference
// replaced; lookupEnv reads the environment (os.LookupEnv).
func resolveConfigProviders(p map[string]string, lookupEnv func(string) (string, bool)) (map[string]string, error) {
	list := strings.TrimSpace(p["config.providers"])
	if list == "" {
		for k := range p {
			if isConfigProviderName(k) {
				return nil, fmt.Errorf("%w: %s is set but config.providers is empty", ErrInvalidConfig, k)
			}
		}
		return p, nil
	}
	providers := map[string]*configProvider{}
	for _, alias := range strings.Split(list, ",") {
		if alias = strings.TrimSpace(alias); alias == "" {
			continue
		}
		cp := &configProvider{alias: alias, class: strings.TrimSpace(p["config.providers."+alias+".class"]), files: map[string]map[string]string{}}
		switch cp.class {
		case fileProviderClass, dirProviderClass, envProviderClass:
		case "":
			return nil, fmt.Errorf("%w: config.providers lists %s but config.providers.%s.class is not set", ErrInvalidConfig, alias, alias)
		default:
			return nil, fmt.Errorf("%w: config.providers.%s.class=%s: want %s, %s or %s", ErrInvalidConfig, alias, cp.class,
				fileProviderClass, dirProviderClass, envProviderClass)
		}
		prefix := "config.providers." + alias + ".param."
		for k, v := range p {
			param, ok := strings.CutPrefix(k, prefix)
			if !ok {
				continue
			}
			switch {
			case param == "allowed.paths" && cp.class != envProviderClass:
				for _, d := range strings.Split(v, ",") {
					if d = strings.TrimSpace(d); d != "" {
						if !filepath.IsAbs(d) {
							return nil, fmt.Errorf("%w: %s: %q is not an absolute path", ErrInvalidConfig, k, d)
						}
						cp.allowed = append(cp.allowed, filepath.Clean(d))
					}
				}
			case param == "allowlist.pattern" && cp.class == envProviderClass:
				re, err := regexp.Compile("^(?:" + v + ")$")
				if err != nil {
					return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, k, err)
				}
				cp.allowlist = re
			default:
				return nil, fmt.Errorf("%w: %s: %s has no parameter %q", ErrInvalidConfig, k, cp.class, param)
			}
		}
		providers[alias] = cp
	}
	for k := range p {
		if rest, ok := strings.CutPrefix(k, "config.providers."); ok && isConfigProviderName(k) {
			alias, _, _ := strings.Cut(rest, ".")
			if providers[alias] == nil {
				return nil, fmt.Errorf("%w: %s: config.providers does not list %s", ErrInvalidConfig, k, alias)
			}
		}
	}
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names) // the first error is the same each run
	out := make(map[string]string, len(p))
	for _, name := range names {
		v := p[name]
		if name == "config.providers" || isConfigProviderName(name) || !strings.Contains(v, "${") {
			out[name] = v
			continue
		}
		var err error
		out[name] = configVarPattern.ReplaceAllStringFunc(v, func(ref string) string {
			m := configVarPattern.FindStringSubmatch(ref)
			cp := providers[m[1]]
			if cp == nil || err != nil {
				return ref // not a listed provider: left as written, as Kafka does
			}
			var got string
			got, err = cp.get(m[3], m[4], m[2] != "", lookupEnv)
			if err != nil {
				err = fmt.Errorf("%w: %s: ${%s:...}: %v", ErrInvalidConfig, name, m[1], err)
			}
			return got
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// get resolves one reference: key at path (hasPath says a path was given).
func (cp *configProvider) get(path, key string, hasPath bool, lookupEnv func(string) (string, bool)) (string, error) {
	if cp.class == envProviderClass {
		if hasPath {
			return "", fmt.Errorf("EnvVarConfigProvider takes ${%s:VARIABLE}, no path", cp.alias)
		}
		if cp.allowlist != nil && !cp.allowlist.MatchString(key) {
			return "", fmt.Errorf("variable %s is not allowed by config.providers.%s.param.allowlist.pattern", key, cp.alias)
		}
		v, ok := lookupEnv(key)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", key)
		}
		return v, nil
	}
	if !hasPath || path == "" {
		return "", fmt.Errorf("want ${%s:path:key}", cp.alias)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("path %s is not absolute", path)
	}
	target := filepath.Clean(path)
	if cp.class == dirProviderClass {
		if key == "" || strings.ContainsAny(key, `/\`) || key == "." || key == ".." {
			return "", fmt.Errorf("key %q is not a file name in %s", key, path)
		}
		target = filepath.Join(target, key)
	}
	if cp.allowed != nil {
		ok := false
		for _, d := range cp.allowed {
			if target == d || strings.HasPrefix(target, d+string(filepath.Separator)) {
				ok = true
			}
		}
		if !ok {
			return "", fmt.Errorf("%s is outside config.providers.%s.param.allowed.paths", target, cp.alias)
		}
	}
	if cp.class == dirProviderClass {
		b, err := readProvided(target)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	kv, ok := cp.files[target]
	if !ok {
		b, err := readProvided(target)
		if err != nil {
			return "", err
		}
		if kv, err = props.Parse(strings.NewReader(string(b))); err != nil {
			return "", fmt.Errorf("%s: not a properties file", target)
		}
		cp.files[target] = kv
	}
	v, ok := kv[key]
	if !ok {
		return "", fmt.Errorf("%s has no key %s", target, key)
	}
	return v, nil
}

func readProvided(path string) ([]byte, error) {
	b, err := vfs.ReadFile(vfs.Default, path, maxProvidedFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %v", path, err)
	}
	return b, nil
}
