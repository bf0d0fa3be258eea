package broker

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/tiering"
	"github.com/strata-io/strata/tiering/objstore"
)

func TestParseConfigRemoteStorageSettings(t *testing.T) {
	parse := func(props map[string]string, env ...string) (Config, error) {
		base := map[string]string{"log.dirs": "/data/strata"}
		for k, v := range props {
			base[k] = v
		}
		return ParseConfig(MergeProperties(base, env, nil))
	}
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := c.RemoteStore
	if !c.RemoteStorageEnable || rs.Backend != tiering.BackendFS || rs.FSPath != filepath.Join("/data/strata", "objects") {
		t.Fatalf("defaults: enable=%v %+v", c.RemoteStorageEnable, rs)
	}
	if rs.RequestTimeout.Milliseconds() != 30000 || rs.Retry.MaxAttempts != 5 ||
		rs.Retry.BaseDelay.Milliseconds() != 100 || rs.Retry.MaxDelay.Milliseconds() != 5000 || rs.S3.Region != "us-east-1" || rs.S3.PathStyle {
		t.Fatalf("default timeouts and retries: %+v", rs)
	}

	c, err = parse(map[string]string{
		"remote.storage.backend":            "s3",
		"remote.storage.s3.endpoint":        "http://127.0.0.1:9000",
		"remote.storage.s3.region":          "eu-west-1",
		"remote.storage.s3.prefix":          "prod",
		"remote.storage.s3.path.style":      "true",
		"remote.storage.s3.access.key":      "AK",
		"remote.storage.retry.max.attempts": "3",

		"remote.storage.s3.multipart.part.size.bytes": "134217728",
	}, "STRATA_REMOTE_STORAGE_S3_BUCKET=from-env", "STRATA_REMOTE_STORAGE_S3_SECRET_KEY=SK")
	if err != nil {
		t.Fatal(err)
	}
	s3 := c.RemoteStore.S3
	if c.RemoteStore.Backend != "s3" || s3.Bucket != "from-env" || s3.Endpoint != "http://127.0.0.1:9000" || s3.Region != "eu-west-1" ||
		s3.Prefix != "prod" || !s3.PathStyle || s3.AccessKey != "AK" || s3.SecretKey != "SK" || c.RemoteStore.Retry.MaxAttempts != 3 {
		t.Fatalf("s3 settings: %+v", c.RemoteStore)
	}
	if s3.PartSize != 128<<20 || s3.MultipartThreshold != objstore.DefaultS3MultipartThreshold {
		t.Fatalf("multipart settings: part %d threshold %d", s3.PartSize, s3.MultipartThreshold)
	}

	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"remote.storage.backend": "s3"}, "remote.storage.s3.bucket"},
		{map[string]string{"remote.storage.backend": "hdfs"}, `"hdfs"`},
		{map[string]string{"remote.storage.backend": "s3", "remote.storage.s3.bucket": "b", "remote.storage.s3.access.key": "AK"}, "go together"},
		{map[string]string{"remote.storage.s3.path.style": "yes"}, "not a boolean"},
		{map[string]string{"remote.storage.request.timeout.ms": "0"}, "remote.storage.request.timeout.ms"},
		{map[string]string{"remote.storage.retry.max.attempts": "0"}, "remote.storage.retry.max.attempts"},
		{map[string]string{"remote.storage.retry.backoff.ms": "6000"}, "backoff.max.ms"},
		{map[string]string{"remote.storage.s3.multipart.part.size.bytes": "1048576"}, "remote.storage.s3.multipart.part.size.bytes"},
		{map[string]string{"remote.storage.s3.multipart.threshold.bytes": "6442450944"}, "5 GiB"},
	} {
		if _, err := parse(tc.props); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want ErrInvalidConfig mentioning %q", tc.props, err, tc.want)
		}
	}
	// With the tier disabled, its store settings are not checked.
	if _, err := parse(map[string]string{"remote.log.storage.system.enable": "false", "remote.storage.backend": "s3"}); err != nil {
		t.Fatalf("disabled tier with an incomplete s3 config: %v", err)
	}
}

func TestNodeOpensFSRemoteStoreUnderLogDirByDefault(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	rs := n.RemoteStore()
	if rs == nil {
		t.Fatal("no remote store on defaults")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if _, err := rs.Put(ctx, "t-abc/0/00000000000000000000-u.log", strings.NewReader("segment"), 7, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "objects", "t-abc", "0", "00000000000000000000-u.log"))
	if err != nil || string(b) != "segment" {
		t.Fatalf("object file under <log dir>/objects: %q, %v", b, err)
	}
	if v, ok := scrapeMetrics(t, n).value("strata_objstore_requests_total", "backend", "fs", "op", "put", "result", "ok"); !ok || v != 1 {
		t.Fatalf("strata_objstore_requests_total{backend=fs,op=put,result=ok} = %v (found %v), want 1", v, ok)
	}

	// The objects directory is not a log: a restart on the same directory
	// neither trips over it nor removes it, and the object reads back.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, dir, nil)
	rc, err := n2.RemoteStore().Get(ctx, "t-abc/0/00000000000000000000-u.log", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err != nil || string(b) != "segment" {
		t.Fatalf("object after restart: %q, %v", b, err)
	}
}

func TestNodeWithRemoteStorageDisabledHasNoStore(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, map[string]string{"remote.log.storage.system.enable": "false"})
	if n.RemoteStore() != nil {
		t.Fatal("remote store opened while remote.log.storage.system.enable=false")
	}
	if _, err := os.Stat(filepath.Join(dir, "objects")); !os.IsNotExist(err) {
		t.Fatalf("objects directory created while disabled: %v", err)
	}
	if _, ok := scrapeMetrics(t, n).value("strata_objstore_requests_total"); ok {
		t.Fatal("object-store metrics registered while disabled")
	}
}

func TestNodeFSRemoteStoreHonoursFSPath(t *testing.T) {
	objects := filepath.Join(t.TempDir(), "elsewhere")
	n := startNode(t, t.TempDir(), map[string]string{"remote.storage.fs.path": objects})
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if _, err := n.RemoteStore().Put(ctx, "k/v", strings.NewReader("x"), 1, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(objects, "k", "v")); err != nil {
		t.Fatalf("object not under remote.storage.fs.path: %v", err)
	}
}

// minioSettings are the remote.storage.* settings of srv's bucket.
func minioSettings(srv *miniotest.Server, bucket string) map[string]string {
	return map[string]string{
		"remote.storage.backend":       "s3",
		"remote.storage.s3.endpoint":   srv.Endpoint,
		"remote.storage.s3.bucket":     bucket,
		"remote.storage.s3.prefix":     "strata",
		"remote.storage.s3.path.style": "true", // MinIO serves path-style
		"remote.storage.s3.access.key": srv.AccessKey,
		"remote.storage.s3.secret.key": srv.SecretKey,
	}
}

func TestNodeS3RemoteStoreAgainstMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	n := startNode(t, t.TempDir(), minioSettings(srv, srv.Bucket))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if _, err := n.RemoteStore().Put(ctx, "t-abc/0/seg.log", strings.NewReader("from strata"), 11, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Read back with minio-go, an S3 client independent of the one under
	// test, at the prefixed key.
	obj, err := srv.Client(t).GetObject(ctx, srv.Bucket, "strata/t-abc/0/seg.log", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	if b, err := io.ReadAll(obj); err != nil || string(b) != "from strata" {
		t.Fatalf("minio-go read %q, %v", b, err)
	}
	sc := scrapeMetrics(t, n)
	if v, ok := sc.value("strata_objstore_requests_total", "backend", "s3", "op", "put", "result", "ok"); !ok || v != 1 {
		t.Fatalf("s3 put requests = %v (found %v), want 1", v, ok)
	}
	if v, ok := sc.value("strata_objstore_bytes_total", "backend", "s3", "op", "put"); !ok || v != 11 {
		t.Fatalf("s3 put bytes = %v (found %v), want 11", v, ok)
	}
}

func TestNodeOpenFailsOnMissingBucket(t *testing.T) {
	srv := miniotest.Start(t)
	cfg := testConfig(t, t.TempDir(), minioSettings(srv, "no-such-bucket"))
	n, err := Open(Options{Config: cfg, Logger: testLogger(), StartTimeout: testWait})
	if err == nil {
		n.Close()
		t.Fatal("node started on a missing bucket")
	}
	if !errors.Is(err, tiering.ErrStoreUnavailable) || !strings.Contains(err.Error(), `remote.storage.s3.bucket "no-such-bucket": bucket does not exist`) {
		t.Fatalf("Open on a missing bucket: %v", err)
	}
}

// TestDescribeConfigsHidesS3SecretKey: the secret key is described as set
// and sensitive with a null value (synonyms too), never echoed, while the
// access key, an identifier, is shown.
func TestDescribeConfigsHidesS3SecretKey(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{
		"remote.log.storage.system.enable": "false", // nothing to reach: only the settings matter
		"remote.storage.s3.access.key":     "AKIDEXAMPLE",
		"remote.storage.s3.secret.key":     "wJalrXUtnFEMI-very-secret",
	})
	c := dialRaw(t, n)
	resp := c.roundTrip(describeConfigsReq(4, true, false, configResource(kmsg.ConfigResourceTypeBroker, "1"))).(*kmsg.DescribeConfigsResponse)
	res := resp.Resources[0]
	sk := describedConfig(t, res, "remote.storage.s3.secret.key")
	if !sk.IsSensitive || sk.Value != nil || sk.Source != kmsg.ConfigSourceStaticBrokerConfig || sk.ConfigType != kmsg.ConfigTypePassword {
		t.Fatalf("secret key described as %+v", sk)
	}
	for _, s := range sk.ConfigSynonyms {
		if s.Value != nil {
			t.Fatalf("secret key synonym %s carries a value", s.Name)
		}
	}
	if ak := describedConfig(t, res, "remote.storage.s3.access.key"); ak.IsSensitive || ak.Value == nil || *ak.Value != "AKIDEXAMPLE" || ak.ConfigType != kmsg.ConfigTypeString {
		t.Fatalf("access key described as %+v", ak)
	}
	// Belt and braces: the secret appears nowhere in the encoded answer.
	if strings.Contains(string(resp.AppendTo(nil)), "very-secret") {
		t.Fatal("the secret key's value is in the DescribeConfigs response")
	}
}

// With the remote tier off, a topic cannot ask for remote storage
// (INVALID_CONFIG, as Kafka): nothing would upload it, and its local
// retention, which deletes only uploaded data, would never free disk.
func TestRemoteStorageTopicRefusedWhenTierDisabled(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"remote.log.storage.system.enable": "false"})
	adm := newAdmin(t, n)
	on := "true"
	resp, err := adm.CreateTopic(testCtx(t), 1, 1, map[string]*string{"remote.storage.enable": &on}, "tiered")
	if !errors.Is(resp.Err, kerr.InvalidConfig) {
		t.Fatalf("create tiered topic with the tier off: %v / %v, want INVALID_CONFIG", err, resp.Err)
	}
	createTopic(t, adm, "plain", 1, nil)
	res, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Name: "remote.storage.enable", Value: &on}}, "plain")
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidConfig) {
		t.Fatalf("alter to remote storage with the tier off: %v / %+v, want INVALID_CONFIG", err, res)
	}
}
