package objstore

// S3Store: the ObjectStore backend for AWS S3, MinIO and any S3-compatible
// server, through aws-sdk-go-v2.
//
// Choices, and why:
//
//   - Retries: the SDK's own retryer is disabled (aws.NopRetryer) unless
//     S3Options.MaxAttempts > 1. The tiering layer wraps every store in its
//     own retry decorator with backoff and a budget; two nested retry loops
//     would multiply attempts and hide the real error rate from its metrics.
//   - Checksums and payload signing: requests are signed with
//     UNSIGNED-PAYLOAD and RequestChecksumCalculation is WhenRequired. The
//     SDK's defaults (a SHA-256 of the payload for SigV4 over plain HTTP, a
//     CRC32 checksum for every PUT) need a seekable body that they read
//     twice, or buffer; PUTs to a loopback MinIO are CPU-bound already. So
//     segment bodies stream once, with a known ContentLength. Integrity in
//     flight comes from TLS on real endpoints; the data itself carries a
//     CRC32C per record batch that readers check. S3Options.Checksums
//     turns the SDK's checksums back on where that is wanted.
//   - Multipart: objects of MultipartThreshold bytes or more (512 MiB by
//     default) go up in PartSize parts (256 MiB), PartConcurrency at a time;
//     smaller ones in one PUT. Every request is billed alike whatever its
//     size, so the defaults keep a 1 GiB segment's .log to 6 requests
//     (create, 4 parts, complete) where 16 MiB parts took 66; S3 allows
//     single PUTs and parts up to 5 GiB. [S3PutRequests] counts them.
//     A reader that is also an io.ReaderAt and io.Seeker (an *os.File) is
//     read in place, part by part, without copying; any other reader is
//     copied into at most PartConcurrency part buffers. CreateOnly and
//     IfMatch are enforced by CompleteMultipartUpload (If-None-Match /
//     If-Match), so a racing or retried upload can never replace a finished
//     one. A failed multipart upload is aborted.
//   - Keys: S3Options.Prefix is joined in front of every key here, and
//     stripped from the keys List returns, so callers see the same opaque
//     keys on every backend.
//   - ETags are returned without their surrounding quotes and quoted again
//     for If-Match.
//
// Error mapping (S3 code or HTTP status → sentinel):
//
//	PreconditionFailed, ConditionalRequestConflict, 412, 409 on a
//	conditional write                                 → ErrPreconditionFailed
//	NoSuchKey, NotFound, 404                          → ErrNotFound
//	InvalidRange, 416                                 → ErrInvalidRange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Defaults for S3Options.
const (
	DefaultS3Region             = "us-east-1"
	DefaultS3MultipartThreshold = 512 << 20
	DefaultS3PartSize           = 256 << 20
	DefaultS3PartConcurrency    = 4
	// minS3PartSize is S3's smallest part (all but the last).
	minS3PartSize = 5 << 20
	// maxS3Parts is S3's largest part count.
	maxS3Parts = 10000
	// MaxS3PutSize is S3's largest single PUT and largest part.
	MaxS3PutSize = 5 << 30
)

// s3PartLayout returns the part size and count putMultipart uses for an
// object of size bytes: partSize, grown when more than 10,000 parts would
// be needed.
func s3PartLayout(size, partSize int64) (int64, int) {
	if n := (size + partSize - 1) / partSize; n > maxS3Parts {
		partSize = (size + maxS3Parts - 1) / maxS3Parts
	}
	return partSize, int((size + partSize - 1) / partSize)
}

// S3PutRequests returns how many write requests an S3Store with this
// threshold and part size (0: the defaults) sends for one successful Put
// of size bytes: one PutObject below the threshold, else
// CreateMultipartUpload, one UploadPart per part and
// CompleteMultipartUpload (the Head a create-only multipart Put sends
// first is a read). Tests count requests over fake stores with it.
func S3PutRequests(size, threshold, partSize int64) int {
	if threshold <= 0 {
		threshold = DefaultS3MultipartThreshold
	}
	if partSize <= 0 {
		partSize = DefaultS3PartSize
	}
	if size < threshold || size == 0 {
		return 1
	}
	_, n := s3PartLayout(size, partSize)
	return n + 2
}

// ErrS3Config is returned by NewS3Store for unusable options.
var ErrS3Config = errors.New("objstore: bad s3 configuration")

// S3Options configure an S3Store.
type S3Options struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:9000 for a
	// MinIO; empty means AWS S3 resolved from Region.
	Endpoint string
	// Region defaults to DefaultS3Region.
	Region string
	// Bucket must exist.
	Bucket string
	// Prefix is put in front of every key ("a/b" and "a/b/" both give
	// "a/b/<key>"); empty means the bucket root.
	Prefix string
	// PathStyle addresses the bucket as <endpoint>/<bucket>/<key> (MinIO)
	// rather than <bucket>.<endpoint>/<key>.
	PathStyle bool
	// AccessKey and SecretKey are static credentials; when both are empty
	// the AWS default credential chain is used (environment
	// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, shared config files, web
	// identity, container and instance roles).
	AccessKey, SecretKey string
	// MultipartThreshold is the size from which Put uploads in parts;
	// defaults to DefaultS3MultipartThreshold; at most 5 GiB.
	MultipartThreshold int64
	// PartSize defaults to DefaultS3PartSize; 5 MiB to 5 GiB, and grown
	// when an object would need more than 10,000 parts.
	PartSize int64
	// PartConcurrency is how many parts of one object upload at once;
	// defaults to DefaultS3PartConcurrency.
	PartConcurrency int
	// MaxAttempts bounds the SDK's own retries; 0 or 1 disables them (the
	// tiering layer retries).
	MaxAttempts int
	// HTTPClient replaces the SDK's HTTP client when set.
	HTTPClient *http.Client
	// Checksums turns the SDK's request checksums back on (a CRC32 of
	// every PUT and part, checked by the server). Over HTTPS it is sent as
	// a trailer and bodies still stream once; over plain HTTP the SDK
	// reads the body twice, so the body must be seekable (*os.File,
	// *bytes.Reader): a plain io.Reader is refused.
	Checksums bool
}

// S3Store is an ObjectStore on an S3 bucket. It is safe for concurrent use.
type S3Store struct {
	client    *s3.Client
	bucket    string
	prefix    string
	threshold int64
	partSize  int64
	partConc  int
	bodyOpts  []func(*s3.Options) // per-call options of requests with a body
	checksums bool
}

var _ ObjectStore = (*S3Store)(nil)

// NewS3Store builds a client for opts. It makes no request: a wrong
// endpoint or credential shows on the first call.
func NewS3Store(ctx context.Context, opts S3Options) (*S3Store, error) {
	if opts.Bucket == "" {
		return nil, fmt.Errorf("%w: bucket is required", ErrS3Config)
	}
	if (opts.AccessKey == "") != (opts.SecretKey == "") {
		return nil, fmt.Errorf("%w: access key and secret key go together", ErrS3Config)
	}
	if opts.Region == "" {
		opts.Region = DefaultS3Region
	}
	if opts.MultipartThreshold <= 0 {
		opts.MultipartThreshold = DefaultS3MultipartThreshold
	}
	if opts.PartSize <= 0 {
		opts.PartSize = DefaultS3PartSize
	}
	if opts.PartSize < minS3PartSize || opts.PartSize > MaxS3PutSize {
		return nil, fmt.Errorf("%w: part size %d outside S3's [%d, %d]", ErrS3Config, opts.PartSize, minS3PartSize, int64(MaxS3PutSize))
	}
	if opts.MultipartThreshold > MaxS3PutSize {
		return nil, fmt.Errorf("%w: multipart threshold %d above S3's largest single PUT %d", ErrS3Config, opts.MultipartThreshold, int64(MaxS3PutSize))
	}
	if opts.PartConcurrency <= 0 {
		opts.PartConcurrency = DefaultS3PartConcurrency
	}

	loadOpts := []func(*config.LoadOptions) error{config.WithRegion(opts.Region)}
	if opts.AccessKey != "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKey, opts.SecretKey, "")))
	}
	if opts.HTTPClient != nil {
		loadOpts = append(loadOpts, config.WithHTTPClient(opts.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrS3Config, err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
		if opts.Checksums {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
		} else {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		}
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
		if opts.MaxAttempts > 1 {
			o.Retryer = retry.AddWithMaxAttempts(retry.NewStandard(), opts.MaxAttempts)
		} else {
			o.Retryer = aws.NopRetryer{}
		}
	})
	bodyOpts := []func(*s3.Options){unsignedPayload}
	if opts.Checksums {
		bodyOpts = nil
	}
	prefix := opts.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3Store{
		client:    client,
		bucket:    opts.Bucket,
		prefix:    prefix,
		threshold: opts.MultipartThreshold,
		partSize:  opts.PartSize,
		partConc:  opts.PartConcurrency,
		bodyOpts:  bodyOpts,
		checksums: opts.Checksums,
	}, nil
}

// unsignedPayload signs a request with UNSIGNED-PAYLOAD, so the SDK streams
// the body once instead of hashing it first.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

func (s *S3Store) fullKey(key string) string { return s.prefix + key }

// Put implements ObjectStore.
func (s *S3Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	if err := CheckKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if size < 0 {
		return ObjectInfo{}, fmt.Errorf("objstore: put %q: negative size %d", key, size)
	}
	switch opts.Mode {
	case CreateOnly, Overwrite:
	case IfMatch:
		if opts.ETag == "" {
			return ObjectInfo{}, fmt.Errorf("objstore: put %q: IfMatch without an ETag: %w", key, ErrPreconditionFailed)
		}
	default:
		return ObjectInfo{}, fmt.Errorf("objstore: put %q: unknown put mode %d", key, opts.Mode)
	}
	var (
		info ObjectInfo
		err  error
	)
	if size >= s.threshold && size > 0 {
		info, err = s.putMultipart(ctx, key, r, size, opts)
	} else {
		info, err = s.putSingle(ctx, key, r, size, opts)
	}
	if err != nil && opts.Mode == IfMatch && errors.Is(err, ErrNotFound) {
		// If-Match on a missing key: S3 answers 404, the contract 412.
		err = fmt.Errorf("objstore: put %q: %w (%v)", key, ErrPreconditionFailed, err)
	}
	return info, err
}

func (s *S3Store) putSingle(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	body := &exactReader{r: r, left: size}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.fullKey(key)),
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	ra, start, inPlace := readerAtOf(r)
	if s.checksums && inPlace {
		// The SDK may read a checksummed body twice: give it a seekable
		// window of r, and leave r at its end afterwards.
		in.Body = io.NewSectionReader(ra, start, size)
		defer func() { _, _ = r.(io.Seeker).Seek(start+size, io.SeekStart) }()
	}
	setPutCondition(opts, &in.IfNoneMatch, &in.IfMatch)
	out, err := s.client.PutObject(ctx, in, s.bodyOpts...)
	if err != nil {
		if berr := body.err; berr != nil {
			// The body failed, not the server: report that, unwrapped
			// from the transport's error.
			return ObjectInfo{}, fmt.Errorf("objstore: put %q: %w", key, berr)
		}
		return ObjectInfo{}, s.mapErr("put", key, err, true)
	}
	return ObjectInfo{Key: key, Size: size, ETag: unquote(aws.ToString(out.ETag))}, nil
}

func setPutCondition(opts PutOptions, ifNoneMatch, ifMatch **string) {
	switch opts.Mode {
	case CreateOnly:
		*ifNoneMatch = aws.String("*")
	case IfMatch:
		*ifMatch = aws.String(quote(opts.ETag))
	}
}

// putMultipart uploads size bytes of r in parts and completes the upload
// under opts' condition; on any failure the upload is aborted.
func (s *S3Store) putMultipart(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	full := s.fullKey(key)
	if opts.Mode == CreateOnly {
		// Cheap early answer for a retry after a lost acknowledgement:
		// the condition on Complete below stays the authority.
		if _, err := s.Head(ctx, key); err == nil {
			return ObjectInfo{}, fmt.Errorf("objstore: put %q: %w", key, ErrPreconditionFailed)
		} else if !errors.Is(err, ErrNotFound) {
			return ObjectInfo{}, err
		}
	}
	partSize, nparts := s3PartLayout(size, s.partSize)

	createIn := &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(full),
	}
	if s.checksums {
		// Parts then carry CRC32s, which Complete lists back.
		createIn.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32
	}
	created, err := s.client.CreateMultipartUpload(ctx, createIn)
	if err != nil {
		return ObjectInfo{}, s.mapErr("put", key, err, false)
	}
	uploadID := created.UploadId
	done := false
	defer func() {
		if done {
			return
		}
		// Abort on a context of its own: ctx may be the reason we failed.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(s.bucket), Key: aws.String(full), UploadId: uploadID,
		})
	}()

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		parts    = make([]types.CompletedPart, nparts)
		sem      = make(chan []byte, s.partConc)
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	// Part buffers for readers we cannot read in place; each is handed
	// back to sem when its part is done, bounding memory to partConc parts.
	ra, start, inPlace := readerAtOf(r)
	for i := 0; i < s.partConc; i++ {
		if inPlace {
			sem <- nil
		} else {
			sem <- make([]byte, partSize)
		}
	}
	for i := 0; i < nparts; i++ {
		var buf []byte
		select {
		case buf = <-sem:
		case <-pctx.Done():
		}
		if pctx.Err() != nil {
			break
		}
		off := int64(i) * partSize
		n := min(partSize, size-off)
		var body io.ReadSeeker
		if inPlace {
			body = io.NewSectionReader(ra, start+off, n)
		} else {
			if err := readPart(pctx, r, buf[:n]); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					err = fmt.Errorf("%w: part %d: %v", errShortBody, i+1, err)
				} else {
					err = fmt.Errorf("objstore: reading body: part %d: %w", i+1, err)
				}
				fail(fmt.Errorf("objstore: put %q: %w", key, err))
				sem <- buf
				break
			}
			body = bytes.NewReader(buf[:n])
		}
		wg.Add(1)
		go func(i int, body io.ReadSeeker, n int64, buf []byte) {
			defer wg.Done()
			defer func() { sem <- buf }()
			out, err := s.client.UploadPart(pctx, &s3.UploadPartInput{
				Bucket:        aws.String(s.bucket),
				Key:           aws.String(full),
				UploadId:      uploadID,
				PartNumber:    aws.Int32(int32(i + 1)),
				Body:          body,
				ContentLength: aws.Int64(n),
			}, s.bodyOpts...)
			if err != nil {
				fail(s.mapErr("put", key, err, false))
				return
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1)), ChecksumCRC32: out.ChecksumCRC32}
		}(i, body, n, buf)
	}
	wg.Wait()
	if firstErr != nil {
		return ObjectInfo{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, fmt.Errorf("objstore: put %q: %w", key, err)
	}
	if inPlace {
		// Leave r where a sequential read would have: at its end.
		if _, err := r.(io.Seeker).Seek(start+size, io.SeekStart); err != nil {
			return ObjectInfo{}, fmt.Errorf("objstore: put %q: %w", key, err)
		}
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(full),
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	setPutCondition(opts, &in.IfNoneMatch, &in.IfMatch)
	out, err := s.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		return ObjectInfo{}, s.mapErr("put", key, err, true)
	}
	done = true
	return ObjectInfo{Key: key, Size: size, ETag: unquote(aws.ToString(out.ETag))}, nil
}

// readPart fills buf from r, checking ctx between reads so a slow body
// cannot outlive the caller's deadline.
func readPart(ctx context.Context, r io.Reader, buf []byte) error {
	for n := 0; n < len(buf); {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, err := r.Read(buf[n:min(len(buf), n+1<<20)])
		n += k
		if err == io.EOF && n < len(buf) {
			return io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

// readerAtOf returns r as an io.ReaderAt and its current offset when r can
// be read in place (it is also an io.Seeker, like *os.File).
func readerAtOf(r io.Reader) (io.ReaderAt, int64, bool) {
	ra, ok := r.(io.ReaderAt)
	if !ok {
		return nil, 0, false
	}
	sk, ok := r.(io.Seeker)
	if !ok {
		return nil, 0, false
	}
	pos, err := sk.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, false
	}
	return ra, pos, true
}

// Get implements ObjectStore.
func (s *S3Store) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("objstore: get %q: negative offset %d: %w", key, off, ErrInvalidRange)
	}
	if length == 0 {
		// No HTTP range is empty: ask for the size and check off.
		info, err := s.Head(ctx, key)
		if err != nil {
			return nil, err
		}
		if _, _, err := clampRange(info.Size, off, 0); err != nil {
			return nil, fmt.Errorf("objstore: get %q: %w", key, err)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.fullKey(key))}
	switch {
	case length > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+length-1, 10))
	case off > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-")
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		err = s.mapErr("get", key, err, false)
		if errors.Is(err, ErrInvalidRange) {
			// S3 refuses any range of an empty object; the contract
			// reads offset 0 of one as empty.
			if info, herr := s.Head(ctx, key); herr == nil && off == 0 && info.Size == 0 {
				return io.NopCloser(bytes.NewReader(nil)), nil
			}
		}
		return nil, err
	}
	return &s3Body{ctx: ctx, ReadCloser: out.Body}, nil
}

// s3Body is a GetObject body that honours ctx on every Read, as the other
// backends' readers do. The HTTP transport ends a body when its request's
// context is cancelled only while bytes are still on the wire: a body the
// transport has already received whole (a few MiB fit in loopback socket
// buffers) would otherwise read to a clean EOF after the cancel.
type s3Body struct {
	ctx context.Context
	io.ReadCloser
}

func (b *s3Body) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.ReadCloser.Read(p)
}

// Head implements ObjectStore.
func (s *S3Store) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := CheckKey(key); err != nil {
		return ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.fullKey(key)),
	})
	if err != nil {
		return ObjectInfo{}, s.mapErr("head", key, err, false)
	}
	return ObjectInfo{
		Key:          key,
		Size:         aws.ToInt64(out.ContentLength),
		ETag:         unquote(aws.ToString(out.ETag)),
		LastModified: aws.ToTime(out.LastModified),
	}, nil
}

// List implements ObjectStore. It pages through ListObjectsV2.
func (s *S3Store) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.fullKey(prefix)),
	})
	var infos []ObjectInfo
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.mapErr("list", prefix, err, false)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if !strings.HasPrefix(k, s.prefix) {
				continue
			}
			infos = append(infos, ObjectInfo{
				Key:          strings.TrimPrefix(k, s.prefix),
				Size:         aws.ToInt64(o.Size),
				ETag:         unquote(aws.ToString(o.ETag)),
				LastModified: aws.ToTime(o.LastModified),
			})
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
	return infos, nil
}

// Delete implements ObjectStore.
func (s *S3Store) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.fullKey(key)),
	})
	if err != nil {
		err = s.mapErr("delete", key, err, false)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// mapErr turns an SDK error into one wrapping the sentinels. conditional
// says the request carried If-None-Match or If-Match, where a 409
// (ConditionalRequestConflict: a racing conditional write) also means the
// condition did not hold.
func (s *S3Store) mapErr(op, key string, err error, conditional bool) error {
	code := ""
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	status := 0
	var respErr interface{ HTTPStatusCode() int }
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	var sentinel error
	switch {
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed:
		sentinel = ErrPreconditionFailed
	case conditional && (code == "ConditionalRequestConflict" || status == http.StatusConflict):
		sentinel = ErrPreconditionFailed
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		if code == "NoSuchBucket" {
			break
		}
		sentinel = ErrNotFound
	case code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable:
		sentinel = ErrInvalidRange
	}
	if sentinel != nil {
		return fmt.Errorf("objstore: %s %q: %w (%v)", op, key, sentinel, err)
	}
	return fmt.Errorf("objstore: %s %q: %w", op, key, err)
}

// exactReader hands the SDK exactly left bytes of r, and reports a short
// reader as io.ErrUnexpectedEOF rather than sending a short body. It hides
// r's other methods, so the SDK streams it once.
type exactReader struct {
	r    io.Reader
	left int64
	err  error // the body's own failure, kept for Put's answer
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case err == io.EOF && e.left > 0:
		e.err = fmt.Errorf("%w: %d bytes missing", errShortBody, e.left)
		return n, e.err
	case err == io.EOF && n > 0:
		err = nil
	case err != nil && err != io.EOF:
		e.err = fmt.Errorf("objstore: reading body: %w", err)
		return n, e.err
	}
	return n, err
}

func unquote(etag string) string { return strings.Trim(etag, `"`) }

func quote(etag string) string {
	if strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		return etag
	}
	return `"` + etag + `"`
}
