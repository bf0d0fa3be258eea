package broker

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// This file holds the name checks of configuration: which names a node
// accepts besides [Settings], which it refuses, and the suggestion an
// operator gets for a misspelt one. A misspelt name is a start-up error,
// never a silent default: `log.segment.byte=…` or STRATA_LOG_SEGMENT_BYTEZ
// would otherwise run the node with a value the operator did not choose.

// KafkaIgnoredSettings are Kafka broker settings that an operator's
// server.properties commonly holds and that Strata accepts without acting
// on them: each one logs a warning at start and `strata serve --help` lists
// them. They are settings whose absence changes nothing a client can rely
// on (thread pools, socket buffers, replication and transaction internals
// of features Strata does not have yet, ZooKeeper). Settings whose being
// ignored would weaken what the operator asked for (authorizer.class.name,
// ssl.*, sasl.*, broker.id) are not here: they stay errors.
var KafkaIgnoredSettings = []string{
	// threads and sockets
	"num.network.threads", "num.io.threads", "background.threads",
	"socket.send.buffer.bytes", "socket.receive.buffer.bytes", "socket.listen.backlog.size",
	"queued.max.request.bytes", "max.connection.creation.rate",
	"request.timeout.ms",
	"fetch.max.bytes", "fetch.purgatory.purge.interval.requests",
	"producer.purgatory.purge.interval.requests", "delete.records.purgatory.purge.interval.requests",
	// replication settings Strata does not use (its fetchers have their own)
	"num.replica.alter.log.dirs.threads", "replica.socket.timeout.ms",
	"replica.socket.receive.buffer.bytes",
	"controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms",
	"inter.broker.protocol.version",
	"early.start.listeners", "initial.broker.registration.timeout.ms",
	// a SASL controller listener is refused (its RPC is not Kafka's), so
	// the mechanism it would use changes nothing
	"sasl.mechanism.controller.protocol",
	// transactions and producer ids (internals)
	"transaction.state.log.load.buffer.size",
	"transaction.partition.verification.enable", "producer.id.expiration.ms",
	"producer.id.expiration.check.interval.ms",
	// groups and offsets internals
	"offsets.commit.required.acks", "offsets.load.buffer.size",
	"offsets.topic.compression.codec", "group.coordinator.threads",
	"group.coordinator.rebalance.protocols", "group.coordinator.new.enable",
	"group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms",
	"group.consumer.max.size",
	// log internals
	"compression.type", "delete.topic.enable", "log.preallocate",
	"log.message.downconversion.enable", "log.message.format.version",
	"log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
	"log.message.timestamp.after.max.ms", "log.cleaner.io.buffer.size",
	"log.cleaner.io.buffer.load.factor", "log.initial.task.delay.ms",
	// metadata log and quorum internals
	"metadata.log.segment.bytes", "metadata.log.segment.ms",
	"metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
	"metadata.max.retention.bytes", "metadata.max.retention.ms", "metadata.max.idle.interval.ms",
	"controller.quorum.fetch.timeout.ms", "controller.quorum.request.timeout.ms",
	"controller.quorum.retry.backoff.ms", "controller.quorum.append.linger.ms",
	"controller.socket.timeout.ms", "unstable.api.versions.enable",
	// remote storage plug-ins (Strata's tier is built in)
	"remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path",
	"remote.log.storage.manager.impl.prefix", "remote.log.metadata.manager.class.name",
	"remote.log.metadata.manager.class.path", "remote.log.metadata.manager.impl.prefix",
	"remote.log.metadata.manager.listener.name", "remote.log.metadata.custom.metadata.max.bytes",
	"remote.log.index.file.cache.total.size.bytes", "remote.log.manager.thread.pool.size",
	"remote.log.manager.expiration.thread.pool.size", "remote.log.reader.max.pending.tasks",
	// metrics, quotas and ZooKeeper
	"metric.reporters", "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
	"kafka.metrics.reporters", "kafka.metrics.polling.interval.secs", "auto.include.jmx.reporter",
	"replication.quota.window.num",
	"replication.quota.window.size.seconds", "reserved.broker.max.id", "broker.id.generation.enable",
	"zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms",
	"zookeeper.set.acl", "zookeeper.metadata.migration.enable",
}

// kafkaRenamed are Kafka names whose KRaft (and Strata) spelling differs:
// refused, but with the name to use.
var kafkaRenamed = map[string]string{"broker.id": "node.id"}

// clientEnvVars are STRATA_* variables that are not settings: the CLI's
// own (STRATA_BROKERS, STRATA_ADMIN, STRATA_ADMIN_TOKEN[_FILE],
// STRATA_COMMAND_CONFIG and the client security STRATA_CLIENT_*) and the
// test suite's (STRATA_TEST_*).
// `strata serve` does not refuse them.
var clientEnvVars = map[string]bool{"STRATA_BROKERS": true, "STRATA_ADMIN": true, "STRATA_ADMIN_TOKEN": true,
	"STRATA_ADMIN_TOKEN_FILE": true, "STRATA_COMMAND_CONFIG": true}

func isClientEnvVar(name string) bool {
	return clientEnvVars[name] || strings.HasPrefix(name, "STRATA_TEST_") || strings.HasPrefix(name, "STRATA_CLIENT_")
}

// ignoredSetting reports whether name is a Kafka setting Strata accepts
// and ignores. A name that is also in [Settings] is not ignored.
func ignoredSetting(name string) bool {
	if _, ok := lookupSetting(name); ok {
		return false
	}
	for _, s := range KafkaIgnoredSettings {
		if s == name {
			return true
		}
	}
	return false
}

// knownName reports whether name is accepted: a setting or an ignored one.
func knownName(name string) bool {
	if _, _, ok := listenerOverrideName(name); ok {
		return true // listener.name.<l>.ssl.*
	}
	if saslOverrideName(name) {
		return true // listener.name.<l>.[<mechanism>.]sasl.*
	}
	_, ok := lookupSetting(name)
	return ok || ignoredSetting(name) || isConfigProviderName(name) // config.providers.<alias>.class, .param.*
}

// closest returns the candidate nearest name by edit distance, or "" when
// none is near enough to be a likely misspelling.
func closest(name string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(name, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(name)/4) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// allNames returns every accepted property name.
func allNames() []string {
	out := make([]string, 0, len(Settings)+len(KafkaIgnoredSettings))
	for _, s := range Settings {
		out = append(out, s.Name)
	}
	for _, s := range KafkaIgnoredSettings {
		if ignoredSetting(s) {
			out = append(out, s)
		}
	}
	return out
}

// unknownNameError is the error of a property name nothing knows; source
// says where it came from ("--set", a file name).
func unknownNameError(source, name string) error {
	hint := "; 'strata serve --help' lists every setting"
	if c := closest(name, allNames()); c != "" {
		hint = fmt.Sprintf("; did you mean %s?", c)
	}
	if c, ok := kafkaRenamed[name]; ok {
		hint = fmt.Sprintf("; Strata's name for it is %s, as in KRaft", c)
	}
	if source != "" {
		source += ": "
	}
	return fmt.Errorf("%w: %sunknown setting %s%s", ErrInvalidConfig, source, name, hint)
}

// ConfigSources are where `strata serve` reads its configuration from, as
// [LoadConfig] takes them.
type ConfigSources struct {
	File     map[string]string // the properties file (ReadProperties), or nil
	FileName string            // its path, for error messages
	Env      []string          // os.Environ()
	Flags    map[string]string // --set name=value
}

// LoadConfig checks the names of every source, then merges and parses them
// ([MergeProperties], [ParseConfig]). A name no setting has — a --set name,
// a properties key, or a STRATA_* variable — is an error naming its source
// and the closest known name. Kafka names Strata ignores
// ([KafkaIgnoredSettings]) are returned in Config.Ignored, for a warning.
func LoadConfig(src ConfigSources) (Config, error) {
	fileSource := src.FileName
	if fileSource == "" {
		fileSource = "properties file"
	}
	for _, s := range []struct {
		name  string
		props map[string]string
	}{{"--set", src.Flags}, {fileSource, src.File}} {
		names := make([]string, 0, len(s.props))
		for k := range s.props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if !knownName(k) {
				return Config{}, unknownNameError(s.name, k)
			}
		}
	}
	var ignoredEnv []string
	if err := checkEnv(src.Env, &ignoredEnv); err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(MergeProperties(src.File, src.Env, src.Flags))
	if err != nil {
		return c, err
	}
	c.Ignored = append(c.Ignored, ignoredEnv...)
	sort.Strings(c.Ignored)
	c.Ignored = dedupSorted(c.Ignored)
	return c, nil
}

// checkEnv refuses a STRATA_* variable that names no setting, suggesting the
// closest setting's variable; variables of ignored Kafka settings are added
// to ignored by their setting name.
func checkEnv(env []string, ignored *[]string) error {
	byEnv := map[string]string{}
	for _, n := range allNames() {
		byEnv[EnvName(n)] = n
	}
	var vars []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "STRATA_") && !isClientEnvVar(k) {
			vars = append(vars, k)
		}
	}
	sort.Strings(vars)
	for _, k := range vars {
		n, ok := byEnv[k]
		if !ok {
			envs := make([]string, 0, len(byEnv))
			for e := range byEnv {
				envs = append(envs, e)
			}
			sort.Strings(envs)
			hint := "; 'strata serve --help' lists every setting"
			if c := closest(k, envs); c != "" {
				hint = fmt.Sprintf("; did you mean %s (%s)?", c, byEnv[c])
			}
			return fmt.Errorf("%w: environment: unknown setting %s%s", ErrInvalidConfig, k, hint)
		}
		if ignoredSetting(n) {
			*ignored = append(*ignored, n)
		}
	}
	return nil
}

func dedupSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// HelpIgnored writes the Kafka settings Strata accepts and ignores, wrapped.
func HelpIgnored(w io.Writer) {
	var names []string
	for _, s := range KafkaIgnoredSettings {
		if ignoredSetting(s) {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	line := " "
	for _, n := range names {
		if len(line)+1+len(n) > 78 {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += " " + n
	}
	if line != " " {
		fmt.Fprintln(w, line)
	}
}
