package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group/consumer"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/props"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering"
	"github.com/strata-io/strata/tiering/objstore"
)

// Setting is one row of the configuration table: a Kafka property name, its
// default (as the string a properties file would hold; "" = unset) and a
// one-line description. [Settings] drives parsing, validation and
// `strata serve --help`.
type Setting struct {
	Name    string
	Default string
	Doc     string
}

// Settings is the one table of everything `strata serve` understands, in
// the order --help lists it. Names are Kafka's where Kafka has one; the
// strata.* names are ours.
var Settings = []Setting{
	{"node.id", "1", "this node's id, as broker and as controller voter"},
	{"process.roles", "broker,controller", "broker, controller, or both (combined mode)"},
	{"listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "listeners to bind, NAME://host:port (port 0 = any)"},
	{"advertised.listeners", "", "listeners given to clients in Metadata (default: the PLAINTEXT listener as bound)"},
	{"controller.listener.names", "CONTROLLER", "the listener name the controller quorum uses"},
	{"controller.quorum.voters", "1@127.0.0.1:9093", "the controller quorum, id@host:port,..."},
	{"log.dirs", "./strata-data", "data directories, comma-separated (JBOD: new partitions go to the one holding fewest; each is locked with a .lock file)"},
	{"log.dir", "", "data directory when log.dirs is unset (Kafka's single-directory form; log.dirs wins)"},
	{"metadata.log.dir", "", "directory holding the metadata Raft log __cluster_metadata-0 (default: the first log dir, as in Kafka)"},
	{"admin.listener", "127.0.0.1:9644", "admin HTTP listener host:port serving /metrics, /healthz, /readyz, /debug/pprof/ (port 0 = any; empty = none)"},
	{"admin.listener.security.protocol", "PLAINTEXT", "admin HTTP listener protocol: PLAINTEXT (http) or SSL (https, with the ssl.* settings, each overridden by listener.name.admin.ssl.*; ssl.client.auth=required|requested lets a client certificate authenticate)"},
	{"admin.auth.token", "", "bearer token (Authorization: Bearer <token>) the admin listener requires on every path but admin.auth.public.paths; a password: never logged nor shown (use a config provider, ${file:...}, to keep it out of the properties file)"},
	{"admin.auth.token.file", "", "file holding the admin bearer token (instead of admin.auth.token)"},
	{"admin.auth.public.paths", "/healthz,/readyz,/metrics", "admin paths served without authentication when admin.auth.token or an admin client certificate is required (a path ending in / covers everything under it; empty: none)"},
	{"num.partitions", "1", "partitions of an auto-created topic or a CreateTopics asking for -1"},
	{"default.replication.factor", "1", "replication factor of an auto-created topic or a CreateTopics asking for -1 (at most the registered, unfenced brokers)"},
	{"auto.create.topics.enable", "true", "create a topic when Metadata asks for one that does not exist"},
	{"socket.request.max.bytes", "104857600", "largest request accepted; a larger size prefix closes the connection before anything is allocated"},
	{"connections.max.idle.ms", "600000", "close a connection idle for this long"},
	{"queued.max.requests", "500", "requests read from one connection but not yet answered; the reader stops reading at this bound"},
	{"queued.max.request.bytes", "268435456", "bytes of requests being read or handled, all client connections together (the CONTROLLER listener has as much again of its own); a reader stops reading while they are spent (-1 = unbounded, Kafka's default; else at least socket.request.max.bytes)"},
	{"strata.socket.request.read.timeout.ms", "30000", "close a connection whose request has not fully arrived this long after its size prefix (connections.max.idle.ms applies between requests)"},
	{"max.incremental.fetch.session.cache.slots", "1000", "fetch sessions (KIP-227) this broker keeps; 0 disables them"},
	{"group.share.record.lock.duration.ms", "30000", "share groups: how long a consumer holds the records a ShareFetch acquired for it before they are released by themselves (a group's share.record.lock.duration.ms overrides it)"},
	{"group.share.min.record.lock.duration.ms", "15000", "smallest share-group record lock duration allowed"},
	{"group.share.max.record.lock.duration.ms", "60000", "largest share-group record lock duration allowed"},
	{"group.share.delivery.count.limit", "5", "share groups: a record delivered this many times without being accepted is archived (2-10; a group's share.delivery.count.limit overrides it)"},
	{"group.share.partition.max.record.locks", "2000", "share groups: most in-flight records of one share-partition (100-10000); ShareFetch acquires nothing new past it"},
	{"group.share.max.share.sessions", "2000", "share sessions (ShareFetch, one per share-group member and broker) this broker keeps; a new one past it is SHARE_SESSION_LIMIT_REACHED"},
	{"max.request.partition.size.limit", "2000", "most partitions one DescribeTopicPartitions response holds (the request's ResponsePartitionLimit is capped by it)"},
	{"strata.shutdown.timeout.ms", "10000", "how long shutdown waits for in-flight requests before closing connections"},
	{"authorizer.class.name", "", "the authorizer: empty for none (every request allowed, ACL APIs answer SECURITY_DISABLED), or org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log)"},
	{"super.users", "", "principals allowed everything by the authorizer, User:a;User:b (give the brokers' own principal here when inter-broker listeners authenticate); an SSL CONTROLLER listener takes only certificates of these principals, a SASL one only these users"},
	{"allow.everyone.if.no.acl.found", "false", "authorizer: allow an operation on a resource no ACL names"},
	{"max.connections", "2147483647", "client connections this broker keeps open; at the bound its listeners stop accepting until one closes (the inter-broker listener is exempt when there are other listeners)"},
	{"max.connections.per.ip", "2147483647", "connections one client address may hold; a new one beyond is closed at once"},
	{"max.connections.per.ip.overrides", "", "per-address exceptions to max.connections.per.ip, host:count,... (a host name is resolved at start)"},
	{"quota.window.num", "11", "windows a client quota's rate is sampled over (Kafka's sampled rate; the newest may be partial)"},
	{"quota.window.size.seconds", "1", "length of one client quota sampling window, seconds"},
	{"log.segment.bytes", "1073741824", "segment.bytes of topics that do not set it"},
	{"log.roll.ms", "604800000", "segment.ms of topics that do not set it"},
	{"log.roll.hours", "168", "log.roll.ms in hours, used when log.roll.ms is unset (as in Kafka)"},
	{"log.roll.jitter.ms", "0", "segment.jitter.ms of topics that do not set it"},
	{"log.roll.jitter.hours", "0", "log.roll.jitter.ms in hours, used when log.roll.jitter.ms is unset"},
	{"log.index.size.max.bytes", "10485760", "segment.index.bytes of topics that do not set it"},
	{"log.index.interval.bytes", "4096", "index.interval.bytes of topics that do not set it"},
	{"message.max.bytes", "1048588", "max.message.bytes of topics that do not set it (whole batch size)"},
	{"log.flush.interval.messages", "9223372036854775807", "flush.messages of topics that do not set it"},
	{"log.flush.interval.ms", "9223372036854775807", "flush.ms of topics that do not set it"},
	{"log.retention.ms", "604800000", "retention.ms of topics that do not set it (-1 = forever)"},
	{"log.retention.minutes", "", "log.retention.ms in minutes, used when log.retention.ms is unset (as in Kafka)"},
	{"log.retention.hours", "168", "log.retention.ms in hours, used when log.retention.ms and log.retention.minutes are unset"},
	{"log.retention.bytes", "-1", "retention.bytes of topics that do not set it (-1 = unlimited)"},
	{"log.local.retention.ms", "-2", "local.retention.ms of topics that do not set it (-2 = retention.ms)"},
	{"log.local.retention.bytes", "-2", "local.retention.bytes of topics that do not set it (-2 = retention.bytes)"},
	{"log.message.timestamp.type", "CreateTime", "message.timestamp.type of topics that do not set it"},
	{"log.segment.delete.delay.ms", "60000", "file.delete.delay.ms of topics that do not set it"},
	{"log.cleanup.policy", "delete", "cleanup.policy of topics that do not set it: delete, compact or compact,delete"},
	{"log.cleaner.enable", "true", "run the log cleaner that compacts cleanup.policy=compact topics"},
	{"log.cleaner.threads", "1", "log cleaner threads"},
	{"log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", "cleaner read+write bandwidth limit, bytes per second"},
	{"log.cleaner.dedupe.buffer.size", "134217728", "memory for the cleaners' key maps, all threads together (24 bytes per key)"},
	{"log.cleaner.backoff.ms", "15000", "how long a cleaner thread sleeps when no log needs cleaning"},
	{"log.cleaner.delete.retention.ms", "86400000", "delete.retention.ms of topics that do not set it: how long tombstones are kept"},
	{"log.cleaner.min.cleanable.ratio", "0.5", "min.cleanable.dirty.ratio of topics that do not set it"},
	{"log.cleaner.min.compaction.lag.ms", "0", "min.compaction.lag.ms of topics that do not set it"},
	{"log.cleaner.max.compaction.lag.ms", "9223372036854775807", "max.compaction.lag.ms of topics that do not set it"},
	{"log.retention.check.interval.ms", "300000", "how often retention runs"},
	{"log.flush.scheduler.interval.ms", "1000", "how often flush.ms is checked"},
	{"log.flush.offset.checkpoint.interval.ms", "60000", "how often recovery points are checkpointed"},
	{"replica.lag.time.max.ms", "30000", "a follower that has not caught up to the leader's log end for this long leaves the ISR (checked every half of it)"},
	{"replica.high.watermark.checkpoint.interval.ms", "5000", "how often each log's high watermark is written to replication-offset-checkpoint"},
	{"num.recovery.threads.per.data.dir", "2", "logs loaded in parallel at start"},
	{"strata.log.dir.min.free.bytes", "104857600", "a log dir with less free space refuses appends (KAFKA_STORAGE_ERROR; reads, deletes and retention go on) and takes them again once this much is free"},
	{"group.initial.rebalance.delay.ms", "3000", "how long the first rebalance of an empty group waits for more members to join"},
	{"group.min.session.timeout.ms", "6000", "smallest session.timeout.ms a member may ask for"},
	{"group.max.session.timeout.ms", "1800000", "largest session.timeout.ms a member may ask for"},
	{"group.max.size", "2147483647", "most members one group may have"},
	{"group.coordinator.rebalance.protocols", "classic,consumer,share", "group protocols offered: classic (JoinGroup/SyncGroup), consumer (KIP-848 ConsumerGroupHeartbeat, advertised only when listed) and share (KIP-932 share groups, GA in Kafka 4.2: ShareGroupHeartbeat/Describe, ShareFetch, ShareAcknowledge and the share-group offsets APIs advertised only when listed)"},
	{"group.consumer.session.timeout.ms", "45000", "session timeout of KIP-848 consumer group members"},
	{"group.consumer.heartbeat.interval.ms", "5000", "heartbeat interval the coordinator gives KIP-848 consumer group members"},
	{"group.consumer.min.session.timeout.ms", "45000", "smallest group.consumer.session.timeout.ms allowed"},
	{"group.consumer.max.session.timeout.ms", "60000", "largest group.consumer.session.timeout.ms allowed"},
	{"group.consumer.min.heartbeat.interval.ms", "5000", "smallest group.consumer.heartbeat.interval.ms allowed"},
	{"group.consumer.max.heartbeat.interval.ms", "15000", "largest group.consumer.heartbeat.interval.ms allowed"},
	{"group.consumer.max.size", "2147483647", "most members one KIP-848 consumer group may have"},
	{"group.consumer.assignors", "uniform,range", "server-side assignors of KIP-848 consumer groups, the first the default"},
	{"group.share.session.timeout.ms", "45000", "session timeout of share group members (KIP-932; a group's share.session.timeout.ms overrides it)"},
	{"group.share.min.session.timeout.ms", "45000", "smallest group.share.session.timeout.ms (and group share.session.timeout.ms) allowed"},
	{"group.share.max.session.timeout.ms", "60000", "largest group.share.session.timeout.ms (and group share.session.timeout.ms) allowed"},
	{"group.share.heartbeat.interval.ms", "5000", "heartbeat interval the coordinator gives share group members (a group's share.heartbeat.interval.ms overrides it)"},
	{"group.share.min.heartbeat.interval.ms", "5000", "smallest group.share.heartbeat.interval.ms allowed"},
	{"group.share.max.heartbeat.interval.ms", "15000", "largest group.share.heartbeat.interval.ms allowed"},
	{"group.share.max.size", "200", "most members one share group may have (1-1000; GROUP_MAX_SIZE_REACHED past it)"},
	{"group.consumer.migration.policy", "bidirectional", "online migration between classic and KIP-848 consumer groups with members: bidirectional, upgrade (classic to consumer only), downgrade (consumer to classic only) or disabled"},
	{"offsets.topic.num.partitions", "50", "partitions of __consumer_offsets when the broker creates it (fixed afterwards)"},
	{"offsets.topic.replication.factor", "1", "replication factor of __consumer_offsets (1, as Kafka's shipped server.properties sets it; 3 on a 3-node cluster)"},
	{"offsets.topic.segment.bytes", "104857600", "segment.bytes of __consumer_offsets"},
	{"transaction.state.log.num.partitions", "50", "partitions of __transaction_state when the broker creates it (fixed afterwards)"},
	{"transaction.state.log.replication.factor", "3", "replication factor of __transaction_state (capped at the live brokers when it is created, as offsets.topic.replication.factor)"},
	{"transaction.state.log.min.isr", "2", "min.insync.replicas of __transaction_state (capped at its replication factor)"},
	{"transaction.state.log.segment.bytes", "104857600", "segment.bytes of __transaction_state"},
	{"share.coordinator.state.topic.num.partitions", "50", "partitions of __share_group_state when the broker creates it (fixed afterwards)"},
	{"share.coordinator.state.topic.replication.factor", "3", "replication factor of __share_group_state (capped at the live brokers when it is created)"},
	{"share.coordinator.state.topic.min.isr", "2", "min.insync.replicas of __share_group_state (capped at its replication factor)"},
	{"share.coordinator.state.topic.segment.bytes", "104857600", "segment.bytes of __share_group_state"},
	{"share.coordinator.write.timeout.ms", "5000", "how long a share-state write waits for the ISR of its __share_group_state partition (REQUEST_TIMED_OUT after)"},
	{"share.coordinator.state.topic.prune.interval.ms", "300000", "how often the share coordinator moves the log start of its __share_group_state partitions past the records no share-partition's state needs (the topic has no retention of its own)"},
	{"share.coordinator.snapshot.update.records.per.snapshot", "500", "ShareUpdate records written for a share-partition before its next state write is a full ShareSnapshot (what bounds a replay, and what pruning keeps)"},
	{"transaction.max.timeout.ms", "900000", "largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above)"},
	{"transactional.id.expiration.ms", "604800000", "a transactional id with no transaction for this long is forgotten"},
	{"transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", "how often transactions past their timeout are aborted"},
	{"transaction.remove.expired.transaction.cleanup.interval.ms", "3600000", "how often expired transactional ids are removed"},
	{"offsets.retention.minutes", "10080", "committed offsets of an Empty group expire this long after their commit"},
	{"offsets.retention.check.interval.ms", "600000", "how often expired offsets are removed"},
	{"offsets.commit.timeout.ms", "5000", "how long an offset commit or a group's metadata write waits for every ISR member of its __consumer_offsets partition (as acks=all) before answering REQUEST_TIMED_OUT"},
	{"offset.metadata.max.bytes", "4096", "largest metadata string an OffsetCommit may carry"},
	{"broker.session.timeout.ms", "9000", "a broker that has not heartbeated for this long is fenced"},
	{"broker.heartbeat.interval.ms", "2000", "how often this broker heartbeats to the controller"},
	{"broker.rack", "", "this broker's rack: replicas of a partition are placed on as many racks as possible"},
	{"replica.selector.class", "", "which replica a consumer that names its rack (client.rack, Fetch v11+) should fetch from, KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector (an in-sync replica in its rack), or empty / org.apache.kafka.common.replica.LeaderSelector (the leader)"},
	{"min.insync.replicas", "1", "min.insync.replicas of topics that do not set it (the controller's elections use it for KIP-966's ELR)"},
	{"unclean.leader.election.enable", "false", "unclean.leader.election.enable of topics that do not set it: elect an out-of-sync replica (losing acknowledged records) rather than stay offline"},
	{"auto.leader.rebalance.enable", "true", "the controller gives leadership back to preferred replicas (the first of each partition's replicas) where a broker's share of the partitions it prefers but does not lead is above leader.imbalance.per.broker.percentage, in one batch per check"},
	{"leader.imbalance.check.interval.seconds", "300", "how often the controller checks the leader imbalance (auto.leader.rebalance.enable)"},
	{"leader.imbalance.per.broker.percentage", "10", "the share, in percent, of a broker's preferred partitions led elsewhere that triggers their preferred elections"},
	{"controlled.shutdown.enable", "true", "on shutdown, first ask the controller to move this broker's leaderships and ISR memberships away (heartbeats with WantShutDown, at most broker.session.timeout.ms)"},
	{"inter.broker.listener.name", "", "the registered listener followers fetch from and transaction markers go to (default: the listener named by security.inter.broker.protocol when that is set, else the first listener that is not the controller's)"},
	{"security.inter.broker.protocol", "", "the inter-broker listener by protocol: the listener of that name (Kafka's default is PLAINTEXT; set at most one of this and inter.broker.listener.name)"},
	{"listener.security.protocol.map", defaultProtocolMap, "listener name to security protocol, NAME:PROTOCOL,...; protocols PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (the controller listener too: SASL there with PLAIN or OAUTHBEARER, see sasl.mechanism.controller.protocol)"},
	{"sasl.enabled.mechanisms", "GSSAPI", "SASL mechanisms of SASL_* listeners, comma-separated: PLAIN, OAUTHBEARER (Kafka's default GSSAPI is refused); listener.name.<l>.sasl.enabled.mechanisms per listener"},
	{"sasl.mechanism.controller.protocol", "GSSAPI", "the mechanism nodes authenticate with to a SASL_* controller listener: PLAIN or OAUTHBEARER (Kafka's default GSSAPI is refused, and SCRAM cannot work there: its credentials live in the metadata the quorum serves); credentials: the controller listener's jaas config username/password (OAUTHBEARER: unsecuredLoginStringClaim_sub)"},
	{"sasl.mechanism.inter.broker.protocol", "GSSAPI", "the mechanism brokers authenticate with when the inter-broker listener is SASL_* (credentials: that listener's jaas config username/password)"},
	{"sasl.jaas.config", "", "JAAS login module of SASL listeners, Kafka's syntax (PlainLoginModule user_<name>=\"<password>\" are PLAIN's users); listener.name.<l>.<mechanism>.sasl.jaas.config per listener and mechanism; a password"},
	{"sasl.server.max.receive.size", "524288", "largest request frame a SASL listener reads before the connection authenticates (a larger one closes it)"},
	{"connection.failed.authentication.delay.ms", "100", "a failed SASL authentication is answered, and its connection closed, this many ms later (slows password guessing; 0 = at once)"},
	{"strata.sasl.authentication.timeout.ms", "10000", "a connection of a SASL listener that has not authenticated this long after it opened is closed"},
	{"connections.max.reauth.ms", "0", "KIP-368: SASL sessions last at most this long (bounded by an OAUTHBEARER token's expiry); a connection used past it without re-authenticating is closed (0 = no limit)"},
	{"sasl.server.callback.handler.class", "", "OAUTHBEARER validator by Kafka's class name: ...oauthbearer.OAuthBearerValidatorCallbackHandler (JWKS, needs sasl.oauthbearer.jwks.endpoint.url) or ...unsecured.OAuthBearerUnsecuredValidatorCallbackHandler (unset: by the URL); listener.name.<l>.oauthbearer.sasl.server.callback.handler.class"},
	{"sasl.oauthbearer.jwks.endpoint.url", "", "OAUTHBEARER: validate signed JWTs with the keys at this file: or http(s):// URL (unset: Kafka's unsecured-JWS validator)"},
	{"sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000", "OAUTHBEARER: how often the JWKS is fetched again (sooner when a token names an unknown key id)"},
	{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "100", "OAUTHBEARER: first wait before retrying a failed JWKS fetch (doubling)"},
	{"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "10000", "OAUTHBEARER: longest wait between retries of a failed JWKS fetch"},
	{"sasl.oauthbearer.expected.audience", "", "OAUTHBEARER JWKS validator: audiences, comma-separated, one of which the token's aud must hold (unset: not checked)"},
	{"sasl.oauthbearer.expected.issuer", "", "OAUTHBEARER JWKS validator: the iss the token must carry (unset: not checked)"},
	{"sasl.oauthbearer.clock.skew.seconds", "30", "OAUTHBEARER JWKS validator: clock skew allowed for exp, iat and nbf"},
	{"sasl.oauthbearer.sub.claim.name", "sub", "OAUTHBEARER JWKS validator: the claim holding the principal"},
	{"sasl.oauthbearer.scope.claim.name", "scope", "OAUTHBEARER JWKS validator: the claim holding the scope"},
	{"ssl.keystore.type", "JKS", "key store format of SSL listeners: only PEM is supported (Kafka's default JKS is refused)"},
	{"ssl.keystore.location", "", "PEM file holding the private key and its certificate chain"},
	{"ssl.keystore.key", "", "the private key inline, PEM (with ssl.keystore.certificate.chain; instead of ssl.keystore.location)"},
	{"ssl.keystore.certificate.chain", "", "the certificate chain inline, PEM"},
	{"ssl.key.password", "", "password of an encrypted (PKCS#8, PBES2) private key"},
	{"ssl.truststore.type", "JKS", "trust store format: only PEM is supported"},
	{"ssl.truststore.location", "", "PEM file of the CA certificates client (and, inter-broker, peer) certificates are checked against (default: the system's roots)"},
	{"ssl.truststore.certificates", "", "the trust store's CA certificates inline, PEM"},
	{"ssl.client.auth", "none", "client certificates on SSL listeners: none, requested (checked when given) or required (always required on an SSL CONTROLLER listener)"},
	{"ssl.enabled.protocols", "TLSv1.2,TLSv1.3", "TLS versions accepted: TLSv1.2, TLSv1.3"},
	{"ssl.cipher.suites", "", "TLS 1.2 cipher suites by IANA name, comma-separated (default: Go's secure ones; TLS 1.3's are always on)"},
	{"ssl.principal.mapping.rules", "DEFAULT", "maps a client certificate's subject DN to the principal name: RULE:pattern/replacement/[LU],...,DEFAULT (the whole DN)"},
	{"ssl.endpoint.identification.algorithm", "https", "inter-broker TLS clients check the peer certificate's name against its host (https) or not (empty)"},
	{"num.replica.fetchers", "1", "fetcher loops per source broker; a followed partition is hashed onto one"},
	{"replica.fetch.max.bytes", "1048576", "bytes a follower fetch asks of one partition (the first batch comes whole even when larger, KIP-74)"},
	{"replica.fetch.response.max.bytes", "10485760", "bytes a follower fetch asks for in all (the first batch comes whole even when larger)"},
	{"replica.fetch.wait.max.ms", "500", "how long the leader may hold a follower fetch that has fewer than replica.fetch.min.bytes"},
	{"replica.fetch.min.bytes", "1", "bytes a follower fetch waits for before the leader answers"},
	{"replica.fetch.backoff.ms", "1000", "how long a follower waits before fetching a partition again after an error"},
	{"leader.replication.throttled.rate", "9223372036854775807", "bytes/s this broker sends, as leader, to followers out of the ISR of throttled replicas (leader.replication.throttled.replicas); dynamic (kafka-configs --entity-type brokers)"},
	{"follower.replication.throttled.rate", "9223372036854775807", "bytes/s this broker fetches, as follower out of the ISR, for throttled replicas (follower.replication.throttled.replicas); dynamic"},
	{"controller.quorum.election.timeout.ms", "1000", "Raft election timeout"},
	{"controller.quorum.request.timeout.ms", "2000", "how long a broker's metadata stream from the controller may bring nothing (no record, no keepalive: the controller sends one after a quarter of this on an idle stream) before the broker takes its connection for dead and reconnects"},
	{"remote.log.storage.system.enable", "true", "open the remote (tiered) object store at start; topics tier with remote.storage.enable"},
	{"remote.storage.backend", "fs", "object store of the remote tier: fs (a directory) or s3 (AWS S3, MinIO, S3-compatible)"},
	{"remote.storage.fs.path", "", "directory of the fs backend (default: <first log dir>/objects)"},
	{"remote.storage.s3.endpoint", "", "S3 endpoint URL, e.g. http://127.0.0.1:9000 for MinIO (empty: AWS S3 of the region)"},
	{"remote.storage.s3.bucket", "", "S3 bucket (must exist; required with backend s3)"},
	{"remote.storage.s3.region", "us-east-1", "S3 region"},
	{"remote.storage.s3.prefix", "", "key prefix inside the bucket (empty: the bucket root)"},
	{"remote.storage.s3.path.style", "false", "path-style addressing <endpoint>/<bucket>/<key>; MinIO and most S3-compatible stores need true"},
	{"remote.storage.s3.access.key", "", "S3 access key (empty with secret.key empty: the AWS default credential chain)"},
	{"remote.storage.s3.secret.key", "", "S3 secret key (empty with access.key empty: the AWS default credential chain)"},
	{"remote.storage.s3.multipart.threshold.bytes", "536870912", "objects of this size or more go up to S3 in parts, smaller ones in one PUT (at most 5 GiB)"},
	{"remote.storage.s3.multipart.part.size.bytes", "268435456", "size of one multipart part (5 MiB to 5 GiB): a 1 GiB segment is create + 4 parts + complete"},
	{"remote.storage.request.timeout.ms", "30000", "deadline of one object-store request attempt (a Get's until its body is read); a timed-out attempt is retried"},
	{"remote.storage.retry.max.attempts", "5", "attempts per object-store call, the first included, on transient errors"},
	{"remote.storage.retry.backoff.ms", "100", "delay before the second attempt; doubles per attempt, with jitter"},
	{"remote.storage.retry.backoff.max.ms", "5000", "cap on one retry delay"},
	{"remote.log.manager.task.interval.ms", "5000", "how often each led partition is examined for segments to upload and remote retention"},
	{"remote.log.manager.copier.thread.pool.size", "2", "segment uploads running at once on this node (all partitions together)"},
	{"remote.log.manager.copy.max.bytes.per.second", "0", "upload bandwidth limit, bytes per second (0 = unlimited)"},
	{"remote.log.manager.orphan.grace.ms", "120000", "a COPY_STARTED segment nobody is copying is deleted as an orphan after this long"},
	{"follower.fetch.last.tiered.offset.enable", "false", "an empty follower of a tiered partition starts after the last tiered offset instead of at the leader's local start (KIP-1023)"},
	{"remote.log.reader.threads", "8", "object-store reads for fetches running at once on this node (all partitions together)"},
	{"remote.log.manager.fetch.max.bytes.per.second", "0", "remote read bandwidth limit, bytes per second (0 = unlimited)"},
	{"remote.log.reader.readahead.chunks", "2", "chunks prefetched ahead of a sequential remote reader at first; the window then adapts to its speed, up to min(2 x remote.log.reader.threads, half the cache) (0 = no read-ahead)"},
	{"remote.log.cache.bytes", "1073741824", "disk bound of the remote read chunk cache (<first log dir>/remote-cache)"},
	{"remote.log.cache.chunk.bytes", "4194304", "size of one ranged read and cache entry of the remote tier"},
	{"remote.log.index.cache.bytes", "67108864", "memory bound of the cache of remote segments' offset and time indexes"},
	{"remote.fetch.max.wait.ms", "500", "how long a fetch waits for remote-tier data before answering without it (the read goes on and warms the cache)"},
	{"config.providers", "", "config provider aliases, e.g. file,dir,env; each with config.providers.<alias>.class = org.apache.kafka.common.config.provider.FileConfigProvider (${alias:/path/file.properties:key}), DirectoryConfigProvider (${alias:/dir:file}, the file's content) or EnvVarConfigProvider (${alias:VARIABLE}), and .param.allowed.paths / .param.allowlist.pattern; references are resolved in every setting's value before it is read"},
	{"strata.log.level", "info", "debug, info, warn or error"},
	{"strata.log.format", "text", "text or json"},
}

// sensitiveSettings are the settings whose values are secrets:
// DescribeConfigs answers them with IsSensitive and a null value, as Kafka
// does for passwords.
var sensitiveSettings = map[string]bool{
	"remote.storage.s3.secret.key": true,
	"sasl.jaas.config":             true,
	"ssl.key.password":             true,
	"ssl.keystore.key":             true,
	"admin.auth.token":             true,
}

// isSensitiveSetting reports whether name's value is a secret: one of
// sensitiveSettings, a listener override of one
// (listener.name.<l>.ssl.key.password), or by its name a password, a JAAS
// configuration (credentials: sasl.jaas.config and
// listener.name.<l>.<mechanism>.sasl.jaas.config) or a secret key.
func isSensitiveSetting(name string) bool {
	if sensitiveSettings[name] {
		return true
	}
	if s, _, ok := listenerOverrideName(name); ok && sensitiveSettings[s] {
		return true
	}
	n := strings.ToLower(name)
	return strings.HasSuffix(n, "password") || strings.HasSuffix(n, "sasl.jaas.config") || strings.HasSuffix(n, ".secret.key") ||
		strings.HasSuffix(n, ".token")
}

// shownValue is v as an error message may show it: quoted, or [hidden]
// for a secret.
func shownValue(name, v string) string {
	if isSensitiveSetting(name) {
		return "[hidden]"
	}
	return strconv.Quote(v)
}

// defaultProtocolMap is Kafka's listener.security.protocol.map default.
const defaultProtocolMap = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

// Security protocols, as Kafka's SecurityProtocol names them.
const (
	protoPlaintext     = "PLAINTEXT"
	protoSSL           = "SSL"
	protoSASLPlaintext = "SASL_PLAINTEXT"
	protoSASLSSL       = "SASL_SSL"
)

// parseProtocolMap parses listener.security.protocol.map.
func parseProtocolMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, proto, ok := strings.Cut(part, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: listener.security.protocol.map: %q is not NAME:PROTOCOL", ErrInvalidConfig, part)
		}
		switch proto {
		case protoPlaintext, protoSSL, protoSASLPlaintext, protoSASLSSL:
		default:
			return nil, fmt.Errorf("%w: listener.security.protocol.map: %s: unknown security protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", ErrInvalidConfig, name, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: listener.security.protocol.map: listener %s mapped twice", ErrInvalidConfig, name)
		}
		out[name] = proto
	}
	return out, nil
}

// EnvName returns the environment variable that sets name:
// STRATA_ + name upper-cased with dots as underscores (log.dirs →
// STRATA_LOG_DIRS).
func EnvName(name string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
}

func lookupSetting(name string) (Setting, bool) {
	for _, s := range Settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// ReadProperties parses a Kafka-style (Java) properties file: key=value or
// key:value lines, '#' and '!' comments, blank lines, and a trailing
// backslash continuing a line. Keys and values are trimmed.
func ReadProperties(r io.Reader) (map[string]string, error) {
	out, err := props.Parse(r)
	if se := (*props.SyntaxError)(nil); errors.As(err, &se) {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, se.Msg)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: read properties: %w", err)
	}
	return out, nil
}

// MergeProperties layers the sources of configuration, lowest precedence
// first: file, then environment variables named by [EnvName] (env as
// os.Environ gives it), then flags (--set name=value). The result holds only
// what was set ([ParseConfig] supplies the defaults), so that of Kafka's
// alternative spellings (log.retention.ms, .minutes, .hours) the one set
// wins. Names outside [Settings] are kept from file and flags
// ([ParseConfig] refuses them, or ignores Kafka's that Strata does not
// implement); the environment is read for settings and ignored Kafka names
// only ([LoadConfig] refuses other STRATA_* variables).
func MergeProperties(file map[string]string, env []string, flags map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range file {
		out[k] = v
	}
	envVals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			envVals[k] = v
		}
	}
	for _, name := range allNames() {
		if v, ok := envVals[EnvName(name)]; ok {
			out[name] = v
		}
	}
	for k, v := range flags {
		out[k] = v
	}
	return out
}

// Listener is one NAME://host:port entry of listeners or
// advertised.listeners.
type Listener struct {
	Name string
	Host string
	Port int
	// Protocol is the listener's security protocol, from
	// listener.security.protocol.map (set by ParseConfig).
	Protocol string
}

// Addr returns host:port.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String renders the listener as Kafka spells it.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// ParseListeners parses "PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093".
func ParseListeners(s string) ([]Listener, error) {
	var out []Listener
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: listener %q is not NAME://host:port", ErrInvalidConfig, part)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: listener %q: %v", ErrInvalidConfig, part, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%w: listener %q has a bad port", ErrInvalidConfig, part)
		}
		for _, o := range out {
			if o.Name == strings.ToUpper(name) {
				return nil, fmt.Errorf("%w: listener name %s repeated", ErrInvalidConfig, name)
			}
		}
		out = append(out, Listener{Name: strings.ToUpper(name), Host: host, Port: p})
	}
	return out, nil
}

// Config is a parsed, validated node configuration. [ParseConfig] builds
// it from properties; tests may build it by hand from [DefaultConfig].
type Config struct {
	NodeID                   int32
	Roles                    []controller.Role
	Listeners                []Listener // every listener, CONTROLLER included
	AdvertisedListeners      []Listener // nil: the bound client listeners
	ControllerListenerName   string
	QuorumVoters             []controller.Voter
	LogDir                   string   // the first of LogDirs: meta.properties, producer ids, remote cache
	LogDirs                  []string // log.dirs, every one holding partition logs
	LogDirMinFreeBytes       int64
	MetadataLogDir           string
	AdminListener            string
	NumPartitions            int32
	DefaultReplicationFactor int16
	AutoCreateTopics         bool
	SocketRequestMaxBytes    int32
	ConnectionsMaxIdle       time.Duration
	QueuedMaxRequests        int
	QueuedMaxRequestBytes    int64         // -1: unbounded
	RequestReadTimeout       time.Duration // strata.socket.request.read.timeout.ms
	ConnLimits               connLimits    // max.connections, max.connections.per.ip(.overrides)
	QuotaWindowNum           int           // quota.window.num
	QuotaWindowSize          time.Duration // quota.window.size.seconds
	FetchSessionCacheSlots   int
	MaxRequestPartitions     int32 // max.request.partition.size.limit
	ShutdownTimeout          time.Duration

	// Share is group.share.* of the share-partition leader (share_leader.go).
	Share shareLeaderConfig

	// Authorizer is set when authorizer.class.name names the
	// StandardAuthorizer (super.users, allow.everyone.if.no.acl.found).
	Authorizer *authz.Config

	// Consumer groups (group.*, broker/group).
	GroupInitialRebalanceDelay time.Duration
	GroupMinSessionTimeout     time.Duration
	GroupMaxSessionTimeout     time.Duration
	GroupMaxSize               int

	// KIP-848 consumer groups (group.consumer.*, consumer_groups.go).
	GroupConsumerProtocol          bool // "consumer" in group.coordinator.rebalance.protocols
	GroupConsumerSessionTimeout    time.Duration
	GroupConsumerHeartbeatInterval time.Duration
	GroupConsumerMaxSize           int
	GroupConsumerAssignors         []string
	GroupShareProtocol             bool // "share" in group.coordinator.rebalance.protocols
	GroupShareSessionTimeout       time.Duration
	GroupShareHeartbeatInterval    time.Duration
	GroupShareMaxSize              int
	GroupConsumerMigrationPolicy   consumer.MigrationPolicy

	// Committed offsets (offsets.*, coordinator.go).
	OffsetsTopicPartitions        int32
	OffsetsTopicReplicationFactor int16
	OffsetsTopicSegmentBytes      int64
	OffsetsRetention              time.Duration
	OffsetsRetentionCheckInterval time.Duration
	OffsetsCommitTimeout          time.Duration // offsets.commit.timeout.ms
	OffsetMetadataMaxBytes        int

	// Transactions (transaction.*, txn_coordinator.go).
	TxnStatePartitions        int32
	TxnStateReplicationFactor int16
	TxnStateMinISR            int16
	TxnStateSegmentBytes      int64
	TxnMaxTimeout             time.Duration
	TxnIDExpiration           time.Duration
	TxnAbortTimedOutInterval  time.Duration
	TxnRemoveExpiredInterval  time.Duration

	// The share coordinator (share.coordinator.*, share_coordinator.go).
	ShareStatePartitions        int32
	ShareStateReplicationFactor int16
	ShareStateMinISR            int16
	ShareStateSegmentBytes      int64
	ShareWriteTimeout           time.Duration
	SharePruneInterval          time.Duration // share.coordinator.state.topic.prune.interval.ms
	ShareUpdatesPerSnapshot     int           // share.coordinator.snapshot.update.records.per.snapshot

	// Storage holds the broker-level defaults of topic configs (log.*).
	Storage                storage.Config
	RetentionCheckInterval time.Duration
	FlushCheckInterval     time.Duration
	CheckpointInterval     time.Duration
	RecoveryThreads        int
	// Replication, leader side (replica_leader.go).
	ReplicaLagTimeMax               time.Duration // replica.lag.time.max.ms
	HighWatermarkCheckpointInterval time.Duration // replica.high.watermark.checkpoint.interval.ms

	// Log cleaner (log.cleaner.*; storage/cleaner*.go).
	CleanerEnable              bool
	CleanerThreads             int
	CleanerIOMaxBytesPerSecond float64
	CleanerDedupeBufferSize    int64
	CleanerBackoff             time.Duration

	BrokerSessionTimeout    time.Duration
	BrokerHeartbeatInterval time.Duration
	ElectionTimeout         time.Duration
	// QuorumRequestTimeout is controller.quorum.request.timeout.ms: the
	// metadata watch stream's read deadline (controller.ClientOptions.WatchTimeout).
	QuorumRequestTimeout time.Duration
	// snapshotEntries, when set, is the controller's snapshot interval in
	// applied entries (controller.Config.SnapshotEntries; 0: its
	// default). Not a setting: tests shorten it so a restarted broker's
	// view comes from a snapshot image.
	snapshotEntries uint64
	// Rack is broker.rack, registered for rack-aware placement.
	Rack string
	// RackAwareReads is replica.selector.class = RackAwareReplicaSelector
	// (KIP-392): a leader names a same-rack in-sync replica as a
	// consumer's preferred read replica.
	RackAwareReads bool
	// MinInsyncReplicas and UncleanLeaderElection are the broker-level
	// min.insync.replicas and unclean.leader.election.enable (topics that
	// set neither, and no cluster-wide dynamic default, take these).
	MinInsyncReplicas     int32
	UncleanLeaderElection bool
	// AutoLeaderRebalance, LeaderImbalanceCheckInterval and
	// LeaderImbalancePerBrokerPercentage are auto.leader.rebalance.enable,
	// leader.imbalance.check.interval.seconds and
	// leader.imbalance.per.broker.percentage (controller/rebalance.go).
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int
	// ControlledShutdown is controlled.shutdown.enable: Close first has
	// the controller move this broker's leaderships away.
	ControlledShutdown bool

	// The follower side of replication (replica.fetch.*, num.replica.fetchers;
	// replica_fetcher.go). InterBrokerListenerName "" means the first
	// registered listener that is not the controller's.
	InterBrokerListenerName string
	// ControllerProtocol is the controller listener's security protocol,
	// from listener.security.protocol.map.
	ControllerProtocol string
	// TLS holds each SSL listener's settings by listener name (the
	// controller's too when it is SSL, on broker-only nodes as well).
	TLS map[string]*sslSettings
	// SASL holds each SASL_* listener's settings by listener name.
	SASL map[string]*saslSettings
	// InterBrokerSASL is how the inter-broker clients authenticate, when
	// the inter-broker listener is SASL_* (nil otherwise).
	InterBrokerSASL *interBrokerSASL
	// ControllerSASL is how this node's connections to a SASL_*
	// controller listener authenticate (nil otherwise); the listener's
	// own settings are in SASL on a controller.
	ControllerSASL *interBrokerSASL
	// ControllerNodes are super.users: the principals a SASL controller
	// listener lets in (empty: any that authenticates).
	ControllerNodes []string
	ReplicaFetch    ReplicaFetchSettings

	// Remote tier (remote.*; tiering.OpenStore, broker/tiering_store.go).
	RemoteStorageEnable bool
	RemoteStore         tiering.StoreConfig
	Tiering             TieringSettings

	LogLevel  slog.Level
	LogFormat string

	// Props is the merged property map the Config was parsed from (what
	// was set; defaults are not in it), with the value of a setting given
	// in another of Kafka's units under its own name too
	// (log.retention.hours=1 also sets log.retention.ms=3600000 here).
	Props map[string]string
	// Ignored lists the Kafka settings that were set but that Strata
	// does not implement ([KafkaIgnoredSettings]); they are warned about.
	Ignored []string

	// AdminTLS is the admin listener's TLS (admin.listener.security.protocol=SSL), nil for http.
	AdminTLS *sslSettings
	// AdminToken is admin.auth.token (or admin.auth.token.file's content).
	AdminToken string
	// AdminPublicPaths are admin.auth.public.paths.
	AdminPublicPaths []string
}

// TieringSettings are the upload pool's and the remote reader's settings
// (remote.log.*; broker/tiering.go).
type TieringSettings struct {
	TaskInterval           time.Duration
	CopierThreads          int
	CopyMaxBytesPerSecond  int64
	OrphanGrace            time.Duration
	ReaderThreads          int
	FetchMaxBytesPerSecond int64
	ReadAheadChunks        int
	CacheBytes             int64
	ChunkBytes             int64
	IndexCacheBytes        int64
	RemoteFetchMaxWait     time.Duration
	CacheDir               string // <log dir>/remote-cache
	// FollowerFetchLastTiered: an empty follower starts after the last
	// tiered offset (follower.fetch.last.tiered.offset.enable, KIP-1023).
	FollowerFetchLastTiered bool
}

// ReplicaFetchSettings are the replica fetcher's settings, with Kafka's
// names and defaults.
type ReplicaFetchSettings struct {
	Fetchers         int           // num.replica.fetchers
	MaxBytes         int32         // replica.fetch.max.bytes, per partition
	ResponseMaxBytes int32         // replica.fetch.response.max.bytes
	MaxWait          time.Duration // replica.fetch.wait.max.ms
	MinBytes         int32         // replica.fetch.min.bytes
	Backoff          time.Duration // replica.fetch.backoff.ms
}

// DefaultConfig returns the configuration of the table's defaults.
func DefaultConfig() Config {
	c, err := ParseConfig(MergeProperties(nil, nil, nil))
	if err != nil {
		panic("broker: defaults do not parse: " + err.Error())
	}
	return c
}

// ClientListeners returns the listeners that serve Kafka clients: every
// listener but the controller's.
func (c *Config) ClientListeners() []Listener {
	var out []Listener
	for _, l := range c.Listeners {
		if l.Name != c.ControllerListenerName {
			out = append(out, l)
		}
	}
	return out
}

func (c *Config) hasRole(r controller.Role) bool {
	for _, x := range c.Roles {
		if x == r {
			return true
		}
	}
	return false
}

// ParseConfig parses and validates merged properties (see
// [MergeProperties]). Errors wrap [ErrInvalidConfig] and name the setting.
func ParseConfig(props map[string]string) (Config, error) {
	props, perr := resolveConfigProviders(props, os.LookupEnv)
	if perr != nil {
		return Config{}, perr
	}
	c := Config{Props: make(map[string]string, len(props))}
	for k, v := range props {
		c.Props[k] = v
	}
	var firstErr error
	bad := func(name, v string, why string) {
		if firstErr == nil {
			firstErr = fmt.Errorf("%w: %s=%s: %s", ErrInvalidConfig, name, shownValue(name, v), why)
		}
	}
	get := func(name string) string {
		if v, ok := props[name]; ok {
			return strings.TrimSpace(v)
		}
		s, _ := lookupSetting(name)
		return s.Default
	}
	i64 := func(name string, min int64) int64 {
		v := get(name)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			bad(name, v, "not an integer")
			return 0
		}
		if n < min {
			bad(name, v, fmt.Sprintf("below %d", min))
		}
		return n
	}
	// rf reads a replication factor: 1 to 32767 (Kafka's short).
	rf := func(name string) int16 {
		n := i64(name, 1)
		if n > 1<<15-1 {
			bad(name, get(name), "above 32767")
			return 1
		}
		return int16(n)
	}
	ms := func(name string, min int64) time.Duration {
		n := i64(name, min)
		if n > int64(time.Duration(1<<62)/time.Millisecond) {
			return time.Duration(1 << 62)
		}
		return time.Duration(n) * time.Millisecond
	}
	boolean := func(name string) bool {
		v := get(name)
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(name, v, "not a boolean")
		}
		return b
	}

	c.NodeID = int32(i64("node.id", 1))
	if c.NodeID > 1<<30 {
		bad("node.id", get("node.id"), "too large")
	}
	for _, r := range strings.Split(get("process.roles"), ",") {
		role := controller.Role(strings.TrimSpace(r))
		if role != controller.RoleBroker && role != controller.RoleController {
			bad("process.roles", get("process.roles"), "roles are broker and controller")
		}
		c.Roles = append(c.Roles, role)
	}
	c.ControllerListenerName = strings.ToUpper(strings.TrimSpace(strings.Split(get("controller.listener.names"), ",")[0]))
	var err error
	if c.Listeners, err = ParseListeners(get("listeners")); err != nil && firstErr == nil {
		firstErr = err
	}
	if v := get("advertised.listeners"); v != "" {
		if c.AdvertisedListeners, err = ParseListeners(v); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if c.QuorumVoters, err = controller.ParseVoters(get("controller.quorum.voters")); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	// log.dirs, else log.dir (Kafka's order; its default is log.dirs's).
	logDirsName := "log.dirs"
	if _, set := props["log.dirs"]; !set {
		if _, set := props["log.dir"]; set {
			logDirsName = "log.dir"
			c.Props["log.dirs"] = get("log.dir")
		}
	}
	c.LogDirs = nil
	for _, d := range strings.Split(get(logDirsName), ",") {
		if d = strings.TrimSpace(d); d != "" {
			c.LogDirs = append(c.LogDirs, d)
		}
	}
	if len(c.LogDirs) == 0 {
		bad("log.dirs", get("log.dirs"), "empty")
	} else {
		c.LogDir = c.LogDirs[0]
	}
	// As in Kafka, the Raft log defaults to <first log dir>/__cluster_metadata-0:
	// storage.Manager skips that directory. A data directory written before
	// this default (WAL under <log dir>/metadata) keeps its WAL there, or the
	// node would start with empty metadata and set every log aside as stray.
	c.MetadataLogDir = get("metadata.log.dir")
	if c.MetadataLogDir == "" {
		c.MetadataLogDir = c.LogDir
		legacy := filepath.Join(c.LogDir, "metadata")
		if _, err := os.Stat(filepath.Join(legacy, storage.MetadataTopic+"-0")); err == nil {
			c.MetadataLogDir = legacy
		}
	}
	c.AdminListener = strings.TrimSpace(get("admin.listener"))
	if c.AdminListener != "" {
		if _, port, err := net.SplitHostPort(c.AdminListener); err != nil || port == "" {
			bad("admin.listener", c.AdminListener, "want host:port")
		}
	}
	if err := c.parseAdminSecurity(props, get); err != nil && firstErr == nil {
		firstErr = err
	}
	c.NumPartitions = int32(i64("num.partitions", 1))
	c.DefaultReplicationFactor = rf("default.replication.factor")
	c.AutoCreateTopics = boolean("auto.create.topics.enable")
	c.SocketRequestMaxBytes = int32(min(i64("socket.request.max.bytes", 64), 1<<31-1))
	c.ConnectionsMaxIdle = ms("connections.max.idle.ms", 1)
	c.QueuedMaxRequests = int(min(i64("queued.max.requests", 1), 1<<20))
	c.QueuedMaxRequestBytes = i64("queued.max.request.bytes", -1)
	if c.QueuedMaxRequestBytes <= 0 {
		c.QueuedMaxRequestBytes = -1
	} else if c.QueuedMaxRequestBytes < int64(c.SocketRequestMaxBytes) {
		// As Kafka requires: a bound below the largest request would run
		// every such request alone.
		bad("queued.max.request.bytes", get("queued.max.request.bytes"), "below socket.request.max.bytes")
	}
	c.RequestReadTimeout = ms("strata.socket.request.read.timeout.ms", 1)
	c.ConnLimits.Max = int(min(i64("max.connections", 0), maxConnDefault))
	c.ConnLimits.PerIP = int(min(i64("max.connections.per.ip", 0), maxConnDefault))
	if ov, err := parseConnOverrides(get("max.connections.per.ip.overrides"), net.LookupHost); err != nil {
		bad("max.connections.per.ip.overrides", get("max.connections.per.ip.overrides"), err.Error())
	} else {
		c.ConnLimits.Overrides = ov
	}
	if c.ConnLimits.PerIP == 0 && len(c.ConnLimits.Overrides) == 0 {
		// As Kafka: 0 refuses every address, so it needs overrides.
		bad("max.connections.per.ip", "0", "0 needs max.connections.per.ip.overrides")
	}
	c.QuotaWindowNum = int(min(i64("quota.window.num", 2), 1<<10))
	c.QuotaWindowSize = time.Duration(min(i64("quota.window.size.seconds", 1), 1<<20)) * time.Second
	c.FetchSessionCacheSlots = int(min(i64("max.incremental.fetch.session.cache.slots", 0), 1<<20))
	c.Share = parseShareLeaderConfig(i64, bad, get)
	c.MaxRequestPartitions = int32(min(i64("max.request.partition.size.limit", 1), 1<<31-1))
	c.ShutdownTimeout = ms("strata.shutdown.timeout.ms", 0)
	if on, err := authz.CheckClassName(get("authorizer.class.name")); err != nil {
		bad("authorizer.class.name", get("authorizer.class.name"), err.Error())
	} else if on {
		su, err := authz.ParseSuperUsers(get("super.users"))
		if err != nil {
			bad("super.users", get("super.users"), err.Error())
		}
		c.Authorizer = &authz.Config{SuperUsers: su, AllowEveryoneIfNoACLFound: boolean("allow.everyone.if.no.acl.found")}
	}
	c.GroupInitialRebalanceDelay = ms("group.initial.rebalance.delay.ms", 0)
	c.GroupMinSessionTimeout = ms("group.min.session.timeout.ms", 0)
	c.GroupMaxSessionTimeout = ms("group.max.session.timeout.ms", 0)
	c.GroupMaxSize = int(min(i64("group.max.size", 1), 1<<31-1))
	for _, p := range strings.Split(get("group.coordinator.rebalance.protocols"), ",") {
		switch p = strings.ToLower(strings.TrimSpace(p)); p {
		case "classic":
		case "consumer":
			c.GroupConsumerProtocol = true
		case "share":
			c.GroupShareProtocol = true
		default:
			bad("group.coordinator.rebalance.protocols", get("group.coordinator.rebalance.protocols"), "protocols are classic, consumer and share")
		}
	}
	c.GroupConsumerSessionTimeout = ms("group.consumer.session.timeout.ms", 1)
	c.GroupConsumerHeartbeatInterval = ms("group.consumer.heartbeat.interval.ms", 1)
	inBounds := func(name string, v time.Duration, minName, maxName string) {
		lo, hi := ms(minName, 1), ms(maxName, 1)
		switch {
		case lo > hi:
			bad(minName, get(minName), "above "+maxName)
		case v < lo:
			bad(name, get(name), "below "+minName+" ("+get(minName)+")")
		case v > hi:
			bad(name, get(name), "above "+maxName+" ("+get(maxName)+")")
		}
	}
	inBounds("group.consumer.session.timeout.ms", c.GroupConsumerSessionTimeout, "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")
	inBounds("group.consumer.heartbeat.interval.ms", c.GroupConsumerHeartbeatInterval, "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")
	if c.GroupConsumerHeartbeatInterval >= c.GroupConsumerSessionTimeout {
		bad("group.consumer.heartbeat.interval.ms", get("group.consumer.heartbeat.interval.ms"), "must be below group.consumer.session.timeout.ms")
	}
	c.GroupConsumerMaxSize = int(min(i64("group.consumer.max.size", 1), 1<<31-1))
	c.GroupShareSessionTimeout = ms("group.share.session.timeout.ms", 1)
	c.GroupShareHeartbeatInterval = ms("group.share.heartbeat.interval.ms", 1)
	inBounds("group.share.session.timeout.ms", c.GroupShareSessionTimeout, "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")
	inBounds("group.share.heartbeat.interval.ms", c.GroupShareHeartbeatInterval, "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")
	if c.GroupShareHeartbeatInterval >= c.GroupShareSessionTimeout {
		bad("group.share.heartbeat.interval.ms", get("group.share.heartbeat.interval.ms"), "must be below group.share.session.timeout.ms")
	}
	if c.GroupShareMaxSize = int(i64("group.share.max.size", 1)); c.GroupShareMaxSize > 1000 {
		bad("group.share.max.size", get("group.share.max.size"), "above 1000")
	}
	c.GroupConsumerAssignors = nil
	for _, a := range strings.Split(get("group.consumer.assignors"), ",") {
		switch a = strings.ToLower(strings.TrimSpace(a)); a {
		case "uniform", "range":
			c.GroupConsumerAssignors = append(c.GroupConsumerAssignors, a)
		case "org.apache.kafka.coordinator.group.assignor.uniformassignor":
			c.GroupConsumerAssignors = append(c.GroupConsumerAssignors, "uniform")
		case "org.apache.kafka.coordinator.group.assignor.rangeassignor":
			c.GroupConsumerAssignors = append(c.GroupConsumerAssignors, "range")
		default:
			bad("group.consumer.assignors", get("group.consumer.assignors"), "assignors are uniform and range")
		}
	}
	if len(c.GroupConsumerAssignors) == 0 {
		bad("group.consumer.assignors", get("group.consumer.assignors"), "at least one assignor")
	}
	if p, err := consumer.ParseMigrationPolicy(get("group.consumer.migration.policy")); err != nil {
		bad("group.consumer.migration.policy", get("group.consumer.migration.policy"), "one of bidirectional, upgrade, downgrade, disabled")
	} else {
		c.GroupConsumerMigrationPolicy = p
	}
	c.OffsetsTopicPartitions = int32(min(i64("offsets.topic.num.partitions", 1), 1<<20))
	c.OffsetsTopicReplicationFactor = rf("offsets.topic.replication.factor")
	c.OffsetsTopicSegmentBytes = i64("offsets.topic.segment.bytes", 14)
	c.OffsetsRetention = time.Duration(min(i64("offsets.retention.minutes", 1), 1<<40)) * time.Minute
	c.OffsetsRetentionCheckInterval = ms("offsets.retention.check.interval.ms", 1)
	c.OffsetsCommitTimeout = ms("offsets.commit.timeout.ms", 1)
	c.OffsetMetadataMaxBytes = int(min(i64("offset.metadata.max.bytes", 0), 1<<31-1))
	c.TxnStatePartitions = int32(min(i64("transaction.state.log.num.partitions", 1), 1<<20))
	c.TxnStateReplicationFactor = rf("transaction.state.log.replication.factor")
	c.TxnStateMinISR = rf("transaction.state.log.min.isr")
	c.TxnStateSegmentBytes = i64("transaction.state.log.segment.bytes", 14)
	c.ShareStatePartitions = int32(min(i64("share.coordinator.state.topic.num.partitions", 1), 1<<20))
	c.ShareStateReplicationFactor = rf("share.coordinator.state.topic.replication.factor")
	c.ShareStateMinISR = rf("share.coordinator.state.topic.min.isr")
	c.ShareStateSegmentBytes = i64("share.coordinator.state.topic.segment.bytes", 14)
	c.ShareWriteTimeout = ms("share.coordinator.write.timeout.ms", 1)
	c.SharePruneInterval = ms("share.coordinator.state.topic.prune.interval.ms", 1)
	c.ShareUpdatesPerSnapshot = int(min(i64("share.coordinator.snapshot.update.records.per.snapshot", 0), 500))
	c.TxnMaxTimeout = ms("transaction.max.timeout.ms", 1)
	if c.TxnMaxTimeout > math.MaxInt32*time.Millisecond {
		bad("transaction.max.timeout.ms", get("transaction.max.timeout.ms"), "above 2147483647")
	}
	c.TxnIDExpiration = ms("transactional.id.expiration.ms", 1)
	c.TxnAbortTimedOutInterval = ms("transaction.abort.timed.out.transaction.cleanup.interval.ms", 1)
	c.TxnRemoveExpiredInterval = ms("transaction.remove.expired.transaction.cleanup.interval.ms", 1)

	s := storage.DefaultConfig()
	s.SegmentBytes = i64("log.segment.bytes", 14)
	// Kafka's alternative units: the finest one set wins (ms > minutes >
	// hours), else the ms setting's default. The value used is recorded
	// under the ms name in Props, for DescribeConfigs.
	unitMs := func(msName string, min int64, alts ...string) int64 {
		if _, set := props[msName]; set {
			return i64(msName, min)
		}
		for i := 0; i+1 < len(alts); i += 2 {
			name := alts[i]
			if _, set := props[name]; !set {
				continue
			}
			unit, _ := strconv.ParseInt(alts[i+1], 10, 64)
			n := i64(name, math.MinInt64)
			v := n * unit
			if n != 0 && v/unit != n {
				bad(name, get(name), "out of range")
			}
			if v < 0 && min == -1 {
				v = -1 // as Kafka: a negative retention in any unit is -1, forever
			}
			if v < min {
				bad(name, get(name), fmt.Sprintf("below %d ms", min))
			}
			c.Props[msName] = strconv.FormatInt(v, 10)
			return v
		}
		return i64(msName, min)
	}
	s.SegmentMs = unitMs("log.roll.ms", 1, "log.roll.hours", "3600000")
	s.SegmentJitterMs = unitMs("log.roll.jitter.ms", 0, "log.roll.jitter.hours", "3600000")
	s.SegmentIndexBytes = int(min(i64("log.index.size.max.bytes", 4), 1<<31-1))
	s.IndexIntervalBytes = int(min(i64("log.index.interval.bytes", 0), 1<<31-1))
	s.MaxMessageBytes = int(min(i64("message.max.bytes", 0), 1<<31-1))
	s.FlushMessages = i64("log.flush.interval.messages", 1)
	s.FlushMs = i64("log.flush.interval.ms", 0)
	s.RetentionMs = unitMs("log.retention.ms", -1, "log.retention.minutes", "60000", "log.retention.hours", "3600000")
	s.RetentionBytes = i64("log.retention.bytes", -1)
	s.LocalRetentionMs = i64("log.local.retention.ms", -2)
	s.LocalRetentionBytes = i64("log.local.retention.bytes", -2)
	switch v := get("log.message.timestamp.type"); v {
	case "CreateTime":
		s.TimestampType = batch.TimestampType(0)
	case "LogAppendTime":
		s.TimestampType = batch.TimestampType(1)
	default:
		bad("log.message.timestamp.type", v, "CreateTime or LogAppendTime")
	}
	s.FileDeleteDelayMs = i64("log.segment.delete.delay.ms", 0)
	s.CleanupPolicy = get("log.cleanup.policy")
	if !validCleanupPolicy(s.CleanupPolicy) {
		bad("log.cleanup.policy", s.CleanupPolicy, "delete, compact or compact,delete")
	}
	s.DeleteRetentionMs = i64("log.cleaner.delete.retention.ms", 0)
	s.MinCompactionLagMs = i64("log.cleaner.min.compaction.lag.ms", 0)
	s.MaxCompactionLagMs = i64("log.cleaner.max.compaction.lag.ms", 1)
	float := func(name string, lo, hi float64) float64 {
		v := get(name)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < lo || f > hi {
			bad(name, v, fmt.Sprintf("not a number in [%g, %g]", lo, hi))
		}
		return f
	}
	s.MinCleanableDirtyRatio = float("log.cleaner.min.cleanable.ratio", 0, 1)
	c.CleanerEnable = boolean("log.cleaner.enable")
	c.CleanerThreads = int(min(i64("log.cleaner.threads", 1), 64))
	c.CleanerIOMaxBytesPerSecond = float("log.cleaner.io.max.bytes.per.second", 1, math.MaxFloat64)
	c.CleanerDedupeBufferSize = i64("log.cleaner.dedupe.buffer.size", 1<<20)
	c.CleanerBackoff = ms("log.cleaner.backoff.ms", 1)
	c.Storage = s
	c.RetentionCheckInterval = ms("log.retention.check.interval.ms", 1)
	c.FlushCheckInterval = ms("log.flush.scheduler.interval.ms", 1)
	c.CheckpointInterval = ms("log.flush.offset.checkpoint.interval.ms", 1)
	c.ReplicaLagTimeMax = ms("replica.lag.time.max.ms", 1)
	c.HighWatermarkCheckpointInterval = ms("replica.high.watermark.checkpoint.interval.ms", 1)
	c.RecoveryThreads = int(min(i64("num.recovery.threads.per.data.dir", 1), 64))
	c.LogDirMinFreeBytes = i64("strata.log.dir.min.free.bytes", 0)
	c.BrokerSessionTimeout = ms("broker.session.timeout.ms", 1)
	c.BrokerHeartbeatInterval = ms("broker.heartbeat.interval.ms", 1)
	c.Rack = strings.TrimSpace(get("broker.rack"))
	switch v := strings.TrimSpace(get("replica.selector.class")); v {
	case "", rackAwareSelector[:strings.LastIndex(rackAwareSelector, ".")+1] + "LeaderSelector":
	case rackAwareSelector:
		c.RackAwareReads = true
	default:
		bad("replica.selector.class", v, "want "+rackAwareSelector+" or org.apache.kafka.common.replica.LeaderSelector")
	}
	c.MinInsyncReplicas = int32(min(i64("min.insync.replicas", 1), 1<<31-1))
	c.UncleanLeaderElection = boolean("unclean.leader.election.enable")
	c.ControlledShutdown = boolean("controlled.shutdown.enable")
	c.AutoLeaderRebalance = boolean("auto.leader.rebalance.enable")
	c.LeaderImbalanceCheckInterval = time.Duration(min(i64("leader.imbalance.check.interval.seconds", 1), math.MaxInt64/int64(time.Second))) * time.Second
	c.LeaderImbalancePerBrokerPercentage = int(min(i64("leader.imbalance.per.broker.percentage", 0), 100))
	c.ElectionTimeout = ms("controller.quorum.election.timeout.ms", 1)
	c.QuorumRequestTimeout = ms("controller.quorum.request.timeout.ms", 1)
	c.InterBrokerListenerName = strings.ToUpper(get("inter.broker.listener.name"))
	if p := strings.ToUpper(get("security.inter.broker.protocol")); p != "" {
		if c.InterBrokerListenerName != "" {
			bad("security.inter.broker.protocol", p, "only one of inter.broker.listener.name and security.inter.broker.protocol should be set")
		}
		c.InterBrokerListenerName = p
	}
	if pm, err := parseProtocolMap(get("listener.security.protocol.map")); err != nil {
		if firstErr == nil {
			firstErr = err
		}
	} else if err := c.applyProtocols(pm, props, get); err != nil && firstErr == nil {
		firstErr = err
	}
	if c.InterBrokerListenerName != "" && c.InterBrokerListenerName == c.ControllerListenerName {
		bad("inter.broker.listener.name", get("inter.broker.listener.name"), "the controller's listener serves no fetches")
	}
	i32 := func(name string, lo int64) int32 { return int32(min(i64(name, lo), 1<<31-1)) }
	c.ReplicaFetch = ReplicaFetchSettings{
		Fetchers:         int(min(i64("num.replica.fetchers", 1), 256)),
		MaxBytes:         i32("replica.fetch.max.bytes", 0),
		ResponseMaxBytes: i32("replica.fetch.response.max.bytes", 0),
		MaxWait:          ms("replica.fetch.wait.max.ms", 0),
		MinBytes:         i32("replica.fetch.min.bytes", 1),
		Backoff:          ms("replica.fetch.backoff.ms", 0),
	}
	c.RemoteStorageEnable = boolean("remote.log.storage.system.enable")
	c.RemoteStore = tiering.StoreConfig{
		Backend: get("remote.storage.backend"),
		FSPath:  get("remote.storage.fs.path"),
		S3: objstore.S3Options{
			Endpoint:  get("remote.storage.s3.endpoint"),
			Bucket:    get("remote.storage.s3.bucket"),
			Region:    get("remote.storage.s3.region"),
			Prefix:    get("remote.storage.s3.prefix"),
			PathStyle: boolean("remote.storage.s3.path.style"),
			AccessKey: get("remote.storage.s3.access.key"),
			SecretKey: get("remote.storage.s3.secret.key"),

			MultipartThreshold: i64("remote.storage.s3.multipart.threshold.bytes", 1),
			PartSize:           i64("remote.storage.s3.multipart.part.size.bytes", 5<<20),
		},
		RequestTimeout: ms("remote.storage.request.timeout.ms", 1),
		Retry: objstore.RetryPolicy{
			MaxAttempts: int(min(i64("remote.storage.retry.max.attempts", 1), 1000)),
			BaseDelay:   ms("remote.storage.retry.backoff.ms", 1),
			MaxDelay:    ms("remote.storage.retry.backoff.max.ms", 1),
		},
	}
	for _, name := range []string{"remote.storage.s3.multipart.threshold.bytes", "remote.storage.s3.multipart.part.size.bytes"} {
		if n, err := strconv.ParseInt(get(name), 10, 64); err == nil && n > objstore.MaxS3PutSize {
			bad(name, get(name), "above S3's 5 GiB")
		}
	}
	if c.RemoteStore.FSPath == "" {
		c.RemoteStore.FSPath = filepath.Join(c.LogDir, "objects")
	}
	c.Tiering = TieringSettings{
		TaskInterval:            ms("remote.log.manager.task.interval.ms", 1),
		CopierThreads:           int(min(i64("remote.log.manager.copier.thread.pool.size", 1), 256)),
		CopyMaxBytesPerSecond:   i64("remote.log.manager.copy.max.bytes.per.second", 0),
		OrphanGrace:             ms("remote.log.manager.orphan.grace.ms", 0),
		ReaderThreads:           int(min(i64("remote.log.reader.threads", 1), 1024)),
		FetchMaxBytesPerSecond:  i64("remote.log.manager.fetch.max.bytes.per.second", 0),
		ReadAheadChunks:         int(min(i64("remote.log.reader.readahead.chunks", 0), 64)),
		CacheBytes:              i64("remote.log.cache.bytes", 0),
		ChunkBytes:              i64("remote.log.cache.chunk.bytes", 4096),
		IndexCacheBytes:         i64("remote.log.index.cache.bytes", 0),
		RemoteFetchMaxWait:      ms("remote.fetch.max.wait.ms", 1),
		CacheDir:                filepath.Join(c.LogDir, "remote-cache"),
		FollowerFetchLastTiered: boolean("follower.fetch.last.tiered.offset.enable"),
	}
	if c.Tiering.CacheBytes > 0 && c.Tiering.CacheBytes < c.Tiering.ChunkBytes {
		bad("remote.log.cache.bytes", get("remote.log.cache.bytes"), "at least remote.log.cache.chunk.bytes (or 0: no cache)")
	}
	if err := c.LogLevel.UnmarshalText([]byte(get("strata.log.level"))); err != nil {
		bad("strata.log.level", get("strata.log.level"), "debug, info, warn or error")
	}
	c.LogFormat = get("strata.log.format")
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("strata.log.format", c.LogFormat, "text or json")
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if ignoredSetting(k) {
			c.Ignored = append(c.Ignored, k)
		} else if !knownName(k) && firstErr == nil {
			firstErr = unknownNameError("", k)
		}
	}
	if firstErr != nil {
		return c, firstErr
	}
	return c, c.validate()
}

// validCleanupPolicy accepts cleanup.policy lists of delete and compact.
func validCleanupPolicy(v string) bool {
	if strings.TrimSpace(v) == "" {
		return false
	}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
			return false
		}
	}
	return true
}

func (c *Config) validate() error {
	if !c.hasRole(controller.RoleBroker) {
		return fmt.Errorf("%w: process.roles must include broker (a controller-only node is not built yet)", ErrInvalidConfig)
	}
	if len(c.ClientListeners()) == 0 {
		return fmt.Errorf("%w: listeners has no client listener", ErrInvalidConfig)
	}
	if c.hasRole(controller.RoleController) {
		found := false
		for _, l := range c.Listeners {
			found = found || l.Name == c.ControllerListenerName
		}
		if !found {
			return fmt.Errorf("%w: process.roles has controller but listeners has no %s listener", ErrInvalidConfig, c.ControllerListenerName)
		}
	}
	if c.RemoteStorageEnable {
		// The store itself is opened (and an s3 bucket probed) by Open;
		// what needs no network fails here, naming the setting.
		if err := c.RemoteStore.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if c.RemoteStore.Retry.BaseDelay > c.RemoteStore.Retry.MaxDelay {
			return fmt.Errorf("%w: remote.storage.retry.backoff.ms must not exceed remote.storage.retry.backoff.max.ms", ErrInvalidConfig)
		}
	}
	if c.BrokerHeartbeatInterval >= c.BrokerSessionTimeout {
		return fmt.Errorf("%w: broker.heartbeat.interval.ms must be below broker.session.timeout.ms", ErrInvalidConfig)
	}
	return nil
}

// controllerConfig builds the controller's configuration from the node's.
func (c *Config) controllerConfig(listenAddr string, voters []controller.Voter, logger *slog.Logger) controller.Config {
	tick := controller.DefaultTickInterval
	return controller.Config{
		NodeID:                             c.NodeID,
		Roles:                              c.Roles,
		Voters:                             voters,
		ListenerName:                       c.ControllerListenerName,
		ListenAddr:                         listenAddr,
		MetadataLogDir:                     c.MetadataLogDir,
		BrokerSessionTimeout:               c.BrokerSessionTimeout,
		BrokerHeartbeatInterval:            c.BrokerHeartbeatInterval,
		MinInsyncReplicas:                  c.MinInsyncReplicas,
		UncleanLeaderElection:              c.UncleanLeaderElection,
		AutoLeaderRebalance:                c.AutoLeaderRebalance,
		LeaderImbalanceCheckInterval:       c.LeaderImbalanceCheckInterval,
		LeaderImbalancePerBrokerPercentage: c.LeaderImbalancePerBrokerPercentage,
		TickInterval:                       tick,
		SnapshotEntries:                    c.snapshotEntries,
		ElectionTicks:                      max(int(c.ElectionTimeout/tick), 2),
		FrameReadTimeout:                   c.RequestReadTimeout,
		Logger:                             logger,
	}
}

// Help writes the settings table: name, default, description.
func Help(w io.Writer) {
	for _, s := range Settings {
		d := s.Default
		if d == "" {
			d = "(unset)"
		}
		fmt.Fprintf(w, "  %-42s default %s\n      %s (env %s)\n", s.Name, d, s.Doc, EnvName(s.Name))
	}
}

// applyProtocols gives every listener and advertised listener its
// security protocol from pm (listener.security.protocol.map) and parses
// the TLS settings of the SSL ones. A listener the map does not name is
// an error, as in Kafka, except the controller's when the map was not
// set: KRaft takes PLAINTEXT for it then.
func (c *Config) applyProtocols(pm map[string]string, props map[string]string, get func(string) string) error {
	_, mapSet := props["listener.security.protocol.map"]
	proto := func(name string) (string, error) {
		if p, ok := pm[name]; ok {
			return p, nil
		}
		if !mapSet && name == c.ControllerListenerName {
			return protoPlaintext, nil
		}
		return "", fmt.Errorf("%w: listener.security.protocol.map: no security protocol defined for listener %s", ErrInvalidConfig, name)
	}
	var err error
	for i := range c.Listeners {
		if c.Listeners[i].Protocol, err = proto(c.Listeners[i].Name); err != nil {
			return err
		}
	}
	for i, a := range c.AdvertisedListeners {
		found := false
		for _, l := range c.Listeners {
			found = found || l.Name == a.Name
		}
		if !found {
			return fmt.Errorf("%w: advertised.listeners: listener %s is not in listeners (advertised listener names must be a subset of the ones defined in listeners)", ErrInvalidConfig, a.Name)
		}
		if c.AdvertisedListeners[i].Protocol, err = proto(a.Name); err != nil {
			return err
		}
	}
	// The controller listener's protocol is the map's for a broker-only
	// node too, which dials it without binding it.
	if c.ControllerProtocol, err = proto(c.ControllerListenerName); err != nil {
		return err
	}
	names := []string{}
	for _, l := range c.Listeners {
		if l.Name == c.ControllerListenerName {
			continue
		}
		if l.Protocol == protoSSL || l.Protocol == protoSASLSSL {
			names = append(names, l.Name)
		}
		if l.Protocol == protoSASLPlaintext || l.Protocol == protoSASLSSL {
			s, err := parseSASLSettings(l.Name, props, get)
			if err != nil {
				return err
			}
			if c.SASL == nil {
				c.SASL = map[string]*saslSettings{}
			}
			c.SASL[l.Name] = s
		}
	}
	if l, ok := c.interBrokerListener(); ok && c.SASL[l.Name] != nil {
		if c.InterBrokerSASL, err = interBrokerSASLOf(c.SASL[l.Name], get("sasl.mechanism.inter.broker.protocol")); err != nil {
			return err
		}
	}
	if p := c.ControllerProtocol; p == protoSASLPlaintext || p == protoSASLSSL {
		s, cl, err := controllerSASLOf(c.ControllerListenerName, props, get) // sasl_config.go
		if err != nil {
			return err
		}
		if c.hasRole(controller.RoleController) {
			if c.SASL == nil {
				c.SASL = map[string]*saslSettings{}
			}
			c.SASL[c.ControllerListenerName] = s
		}
		c.ControllerSASL = cl
		if c.ControllerNodes, err = authz.ParseSuperUsers(get("super.users")); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	if c.ControllerProtocol == protoSSL || c.ControllerProtocol == protoSASLSSL {
		names = append(names, c.ControllerListenerName)
	}
	for _, name := range names {
		s, err := parseSSLSettings(name, props, get)
		if err != nil {
			return err
		}
		if name == c.ControllerListenerName && c.ControllerProtocol == protoSSL && c.hasRole(controller.RoleController) {
			if err := controllerListenerTLS(s, get("super.users")); err != nil {
				return err
			}
		}
		if c.TLS == nil {
			c.TLS = map[string]*sslSettings{}
		}
		c.TLS[name] = s
	}
	return nil
}

// parseAdminSecurity reads the admin listener's TLS and authentication
// settings (admin.go says what they do).
func (c *Config) parseAdminSecurity(props map[string]string, get func(string) string) error {
	switch p := strings.ToUpper(get("admin.listener.security.protocol")); p {
	case protoPlaintext:
	case protoSSL:
		s, err := parseSSLSettings("ADMIN", props, get)
		if err != nil {
			return err
		}
		c.AdminTLS = s
	default:
		return fmt.Errorf("%w: admin.listener.security.protocol=%q: want PLAINTEXT or SSL", ErrInvalidConfig, p)
	}
	c.AdminToken = get("admin.auth.token")
	if f := get("admin.auth.token.file"); f != "" {
		if c.AdminToken != "" {
			return fmt.Errorf("%w: admin.auth.token.file: set admin.auth.token or admin.auth.token.file, not both", ErrInvalidConfig)
		}
		b, err := vfs.ReadFile(vfs.Default, f, maxProvidedFile)
		if err != nil {
			return fmt.Errorf("%w: admin.auth.token.file: %v", ErrInvalidConfig, err)
		}
		if c.AdminToken = strings.TrimSpace(string(b)); c.AdminToken == "" {
			return fmt.Errorf("%w: admin.auth.token.file: %s is empty", ErrInvalidConfig, f)
		}
	}
	c.AdminPublicPaths = nil
	for _, p := range strings.Split(get("admin.auth.public.paths"), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%w: admin.auth.public.paths: %q is not a path (want /healthz,...)", ErrInvalidConfig, p)
		}
		c.AdminPublicPaths = append(c.AdminPublicPaths, p)
	}
	return nil
}

// controllerListenerTLS locks an SSL CONTROLLER listener down to the
// cluster's nodes: client certificates are required whatever
// ssl.client.auth says (the listener serves Raft and the metadata RPCs,
// never a client), so a truststore is needed to verify them; and when
// super.users is set, the certificate's principal (after
// ssl.principal.mapping.rules) must be one of them. super.users is where
// a Kafka operator already names the brokers' own principals (Kafka needs
// them there for inter-broker traffic under an authorizer), so the same
// line says who the nodes are, with no second list to keep in step.
// Without super.users every certificate the truststore verifies is taken
// for a node (the node warns at start).
func controllerListenerTLS(s *sslSettings, superUsers string) error {
	s.ClientAuth = tls.RequireAndVerifyClientCert
	if s.TruststoreFile == "" && s.TruststoreCert == "" {
		return fmt.Errorf("%w: listener %s: the CONTROLLER listener verifies the nodes' client certificates: set ssl.truststore.location or ssl.truststore.certificates (listener.name.%s.ssl.truststore.* for it alone)",
			ErrInvalidConfig, s.Listener, strings.ToLower(s.Listener))
	}
	su, err := authz.ParseSuperUsers(superUsers)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	s.Nodes = su
	return nil
}

// interBrokerListener is the listener of this node's own configuration
// whose protocol its inter-broker clients speak: inter.broker.listener.name
// (or security.inter.broker.protocol), else the first client listener.
func (c *Config) interBrokerListener() (Listener, bool) {
	for _, l := range c.ClientListeners() {
		if c.InterBrokerListenerName == "" || l.Name == c.InterBrokerListenerName {
			return l, true
		}
	}
	return Listener{}, false
}
