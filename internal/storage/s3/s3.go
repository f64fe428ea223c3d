// Package s3 is the storage driver for any S3-compatible object store
// (aws-sdk-go-v2).
//
// Put is a PutObject with If-None-Match: * (no overwrite) and, when the
// caller knows it, x-amz-checksum-sha256 (the store verifies the bytes).
// Promote is a server-side CopyObject guarded by
// x-amz-copy-source-if-match (the verified source version) and
// If-None-Match: * (no overwrite), asking the store to compute the SHA-256
// of the copy (and, for a public object under object-acl, the public-read
// ACL again: a copy does not keep it). Stat is HeadObject with checksum mode. Presigned PUTs sign
// Content-Type, Content-Length, If-None-Match and x-amz-checksum-sha256 as
// headers -- never hoisted into the query string -- so the store itself
// refuses a wrong length, type or checksum, and a second write.
package s3

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Public access modes (the documented publicAccessMode).
const (
	PublicAccessExternal  = "external"   // no ACL is sent; public reads are served by something else (a CDN, a bucket policy)
	PublicAccessObjectACL = "object-acl" // public objects get the public-read ACL
)

// Config configures the S3 driver.
type Config struct {
	// Bucket is required.
	Bucket string
	// Region; when empty the SDK's provider chain decides, and "us-east-1"
	// is used when that finds none (S3-compatible origins rarely care).
	Region string
	// Endpoint is an optional S3-compatible origin (e.g. http://127.0.0.1:7070).
	Endpoint string
	// ForcePathStyle addresses buckets as <endpoint>/<bucket>.
	ForcePathStyle bool
	// AccessID and AccessKey are optional, but only together; without them
	// the SDK's default credential chain is used.
	AccessID  string
	AccessKey string
	// PublicAccessMode is "external" (default) or "object-acl".
	PublicAccessMode string
	// HTTPClient is optional; when set, Timeout is its owner's to apply.
	HTTPClient *http.Client
	// Timeout bounds each attempt's wait for the store: connecting (at
	// most 5 s of it), the answer's first byte, and every pause while a
	// body is read or written. A store that hangs -- a black-holed route, a
	// paused server -- costs a call this per attempt, never the caller's
	// whole context. Zero: the SDK's defaults (no bound on the answer).
	Timeout time.Duration
}

// maxRetryBackoff is the longest pause between two attempts of a call.
const maxRetryBackoff = time.Second

// Store is the S3 driver.
type Store struct {
	client  *awss3.Client
	presign *awss3.PresignClient
	cfg     Config
}

var _ storage.Store = (*Store)(nil)

// New validates cfg and builds the client. It does not contact the store.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if strings.TrimSpace(cfg.Bucket) == "" {
		return nil, errors.New("s3 storage: bucket is required")
	}
	if (cfg.AccessID == "") != (cfg.AccessKey == "") {
		return nil, errors.New("s3 storage: accessId and accessKey must be given together")
	}
	if cfg.AccessID != "" && (strings.TrimSpace(cfg.AccessID) == "" || strings.TrimSpace(cfg.AccessKey) == "") {
		return nil, errors.New("s3 storage: accessId and accessKey must not be blank")
	}
	switch cfg.PublicAccessMode {
	case "":
		cfg.PublicAccessMode = PublicAccessExternal
	case PublicAccessExternal, PublicAccessObjectACL:
	default:
		return nil, fmt.Errorf("s3 storage: publicAccessMode %q: want external or object-acl", cfg.PublicAccessMode)
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cfg.AccessID, cfg.AccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 storage: load configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		o.UsePathStyle = cfg.ForcePathStyle
		switch {
		case cfg.HTTPClient != nil:
			o.HTTPClient = cfg.HTTPClient
		case cfg.Timeout > 0:
			o.HTTPClient = boundedClient(cfg.Timeout)
		}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		// Three attempts, at most maxRetryBackoff apart: a call to a store
		// that hangs costs at most three Timeouts and two pauses, where the
		// SDK's default backoff (up to 2 s, then 4 s) made it nine seconds
		// with a 1 s Timeout.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) { so.MaxBackoff = maxRetryBackoff })
		// Checksums are ours to choose (SHA-256, declared by the uploader),
		// not the SDK's default CRC32 trailer.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	presign := awss3.NewPresignClient(client, func(po *awss3.PresignOptions) {
		po.Presigner = v4.NewSigner(func(so *v4.SignerOptions) { so.DisableHeaderHoisting = true })
	})
	return &Store{client: client, presign: presign, cfg: cfg}, nil
}

// boundedClient is the SDK's HTTP client with every wait bounded by
// timeout: the dial (at most 5 s), the response's headers, and each read
// of a body (the SDK's read timeout, reset by every byte).
func boundedClient(timeout time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = min(timeout, 5*time.Second)
			d.KeepAlive = 5 * time.Second
		}).
		WithTransportOptions(func(tr *http.Transport) { tr.ResponseHeaderTimeout = timeout }).
		WithReadTimeout(timeout)
}

// Kind implements storage.Store.
func (s *Store) Kind() storage.Kind { return storage.KindS3 }

// Close implements storage.Store: nothing to release but the idle
// connections the SDK's HTTP client keeps.
func (s *Store) Close() error {
	if c, ok := s.client.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return nil
}

// Bucket returns the configured bucket.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// Ping checks that the bucket is reachable with the configured
// credentials: a missing bucket is storage.ErrBucketMissing, refused
// credentials storage.ErrCredentialsRefused, anything else
// storage.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &s.cfg.Bucket})
	switch {
	case err == nil:
		return nil
	case isStatus(err, http.StatusNotFound) || isCode(err, "NoSuchBucket"):
		return fmt.Errorf("%w: %s", storage.ErrBucketMissing, s.cfg.Bucket)
	case isStatus(err, http.StatusForbidden) || isStatus(err, http.StatusUnauthorized):
		return fmt.Errorf("%w (bucket %s): %s", storage.ErrCredentialsRefused, s.cfg.Bucket, codeOf(err))
	}
	return mapError(err)
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.ObjectInfo{}, err
	}
	if opts.Size < 0 {
		return storage.ObjectInfo{}, fmt.Errorf("%w: negative size", storage.ErrInvalidArgument)
	}
	in := &awss3.PutObjectInput{
		Bucket:        &s.cfg.Bucket,
		Key:           &key,
		Body:          &exactReader{r: body, remaining: opts.Size},
		ContentLength: aws.Int64(opts.Size),
		ContentType:   aws.String(opts.ContentType),
		IfNoneMatch:   aws.String("*"),
	}
	if opts.SHA256 != nil {
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(opts.SHA256))
	}
	if opts.Public && s.cfg.PublicAccessMode == PublicAccessObjectACL {
		in.ACL = types.ObjectCannedACLPublicRead
	}
	// The body is a stream, not a seekable buffer: send it unsigned (the
	// request itself is still signed; the checksum, when given, protects
	// the bytes).
	// A stream cannot be rewound, so the SDK must not retry it: the caller
	// (the service, or a sweep) retries the whole upload instead.
	noRetry := func(o *awss3.Options) { o.Retryer = aws.NopRetryer{} }
	if _, err := s.client.PutObject(ctx, in, noRetry, awss3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)); err != nil {
		var short *sizeError
		if errors.As(err, &short) {
			return storage.ObjectInfo{}, fmt.Errorf("%w: %s", storage.ErrPrecondition, short.Error())
		}
		return storage.ObjectInfo{}, mapPutError(err)
	}
	return s.Stat(ctx, key)
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{
		Bucket: &s.cfg.Bucket, Key: &key, ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	oi := storage.ObjectInfo{
		Key:          key,
		Size:         aws.ToInt64(out.ContentLength),
		ETag:         aws.ToString(out.ETag),
		ContentType:  aws.ToString(out.ContentType),
		LastModified: aws.ToTime(out.LastModified),
	}
	if c := aws.ToString(out.ChecksumSHA256); c != "" && !strings.Contains(c, "-") { // "-N" marks a composite multipart checksum
		if sum, err := base64.StdEncoding.DecodeString(c); err == nil && len(sum) == 32 {
			oi.SHA256 = sum
		}
	}
	return oi, nil
}

// Open implements storage.Store.
func (s *Store) Open(ctx context.Context, key string, rng *storage.Range) (io.ReadCloser, error) {
	if err := storage.ValidateKey(key); err != nil {
		return nil, err
	}
	in := &awss3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &key}
	if rng != nil {
		if rng.Offset < 0 {
			return nil, fmt.Errorf("%w: negative range offset", storage.ErrInvalidArgument)
		}
		if rng.Length == 0 {
			return nil, fmt.Errorf("%w: empty range", storage.ErrInvalidArgument)
		}
		r := fmt.Sprintf("bytes=%d-", rng.Offset)
		if rng.Length > 0 {
			r += fmt.Sprint(rng.Offset + rng.Length - 1)
		}
		in.Range = &r
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, mapError(err)
	}
	return out.Body, nil
}

// Promote implements storage.Store.
func (s *Store) Promote(ctx context.Context, src, dst, srcETag string, opts storage.PromoteOptions) (storage.ObjectInfo, error) {
	if err := storage.ValidateKey(src); err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := storage.ValidateKey(dst); err != nil {
		return storage.ObjectInfo{}, err
	}
	// If-None-Match on CopyObject is not honoured by every S3-compatible
	// store, so the destination is checked first as well. Destination keys
	// are fresh UUID keys written only under a completion lease, so the
	// window between the check and the copy is not contended in practice.
	if _, err := s.Stat(ctx, dst); err == nil {
		return storage.ObjectInfo{}, storage.ErrExists
	} else if !errors.Is(err, storage.ErrNotFound) {
		return storage.ObjectInfo{}, err
	}
	in := &awss3.CopyObjectInput{
		Bucket:            &s.cfg.Bucket,
		Key:               &dst,
		CopySource:        aws.String(url.PathEscape(s.cfg.Bucket) + "/" + escapeKey(src)),
		CopySourceIfMatch: aws.String(srcETag),
		IfNoneMatch:       aws.String("*"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		MetadataDirective: types.MetadataDirectiveCopy,
	}
	if opts.Public && s.cfg.PublicAccessMode == PublicAccessObjectACL {
		// A copy never keeps the source's ACL (and the staging object is
		// private anyway): ask for public-read on the copy itself.
		in.ACL = types.ObjectCannedACLPublicRead
	}
	_, err := s.client.CopyObject(ctx, in)
	if err != nil {
		if !isStatus(err, http.StatusPreconditionFailed) {
			return storage.ObjectInfo{}, mapError(err)
		}
		// 412 is both "source version changed" and "destination exists".
		if _, serr := s.Stat(ctx, dst); serr == nil {
			return storage.ObjectInfo{}, storage.ErrExists
		}
		return storage.ObjectInfo{}, fmt.Errorf("%w: source version changed", storage.ErrPrecondition)
	}
	return s.Stat(ctx, dst)
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
	if err = mapError(err); errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	return err
}

// List implements storage.Store: ListObjectsV2, a page (up to 1,000
// keys) at a time, in the store's UTF-8 binary key order.
func (s *Store) List(ctx context.Context, prefix, after string, fn func(storage.ObjectInfo) error) error {
	in := &awss3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: aws.String(prefix)}
	if after != "" {
		in.StartAfter = aws.String(after)
	}
	p := awss3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return mapError(err)
		}
		for _, o := range page.Contents {
			oi := storage.ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), LastModified: aws.ToTime(o.LastModified)}
			if err := fn(oi); err != nil {
				return err
			}
		}
	}
	return nil
}

// PresignPut implements storage.Store.
func (s *Store) PresignPut(ctx context.Context, key string, opts storage.PresignPutOptions) (storage.Presigned, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.Presigned{}, err
	}
	if err := storage.CheckLifetime(opts.Expires); err != nil {
		return storage.Presigned{}, err
	}
	in := &awss3.PutObjectInput{
		Bucket:        &s.cfg.Bucket,
		Key:           &key,
		ContentLength: aws.Int64(opts.Size),
		ContentType:   aws.String(opts.ContentType),
		IfNoneMatch:   aws.String("*"),
	}
	if opts.SHA256 != nil {
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(opts.SHA256))
	}
	req, err := s.presign.PresignPutObject(ctx, in, awss3.WithPresignExpires(opts.Expires))
	if err != nil {
		return storage.Presigned{}, mapError(err)
	}
	return presigned(req.Method, req.URL, req.SignedHeader, opts.Expires), nil
}

// PresignGet implements storage.Store.
func (s *Store) PresignGet(ctx context.Context, key string, opts storage.PresignGetOptions) (storage.Presigned, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.Presigned{}, err
	}
	if err := storage.CheckLifetime(opts.Expires); err != nil {
		return storage.Presigned{}, err
	}
	in := &awss3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &key}
	if opts.ContentDisposition != "" {
		in.ResponseContentDisposition = aws.String(opts.ContentDisposition)
	}
	if opts.ContentType != "" {
		in.ResponseContentType = aws.String(opts.ContentType)
	}
	req, err := s.presign.PresignGetObject(ctx, in, awss3.WithPresignExpires(opts.Expires))
	if err != nil {
		return storage.Presigned{}, mapError(err)
	}
	return presigned(req.Method, req.URL, req.SignedHeader, opts.Expires), nil
}

// presigned keeps the signed headers a client must send (Host is implied by
// the URL) and the expiry.
func presigned(method, u string, signed http.Header, lifetime time.Duration) storage.Presigned {
	h := http.Header{}
	for k, v := range signed {
		if !strings.EqualFold(k, "Host") {
			h[http.CanonicalHeaderKey(k)] = v
		}
	}
	return storage.Presigned{Method: method, URL: u, Header: h, ExpiresAt: time.Now().Add(lifetime)}
}

// escapeKey escapes each segment of a key for x-amz-copy-source.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// mapPutError maps a PutObject failure: 412 is an existing object.
func mapPutError(err error) error {
	if isStatus(err, http.StatusPreconditionFailed) {
		return storage.ErrExists
	}
	return mapError(err)
}

// mapError is the one place SDK errors become storage errors. The SDK's
// messages name the operation, bucket and key but never credentials or
// signatures.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	switch {
	case errors.As(err, &nsk), errors.As(err, &nf), isStatus(err, http.StatusNotFound):
		return storage.ErrNotFound
	case isStatus(err, http.StatusPreconditionFailed):
		return storage.ErrPrecondition
	case isCode(err, "BadDigest", "XAmzContentChecksumMismatch", "InvalidDigest", "IncompleteBody"):
		return fmt.Errorf("%w: %s", storage.ErrPrecondition, codeOf(err))
	case isStatus(err, http.StatusRequestedRangeNotSatisfiable):
		return fmt.Errorf("%w: range not satisfiable", storage.ErrInvalidArgument)
	default:
		return fmt.Errorf("%w: s3 storage: %w", storage.ErrUnavailable, err)
	}
}

func isStatus(err error, status int) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == status
}

func isCode(err error, codes ...string) bool {
	c := codeOf(err)
	for _, want := range codes {
		if c == want {
			return true
		}
	}
	return false
}

func codeOf(err error) string {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// sizeError reports a body shorter or longer than its declared size.
type sizeError struct{ msg string }

func (e *sizeError) Error() string { return e.msg }

// exactReader yields exactly remaining bytes of r and fails when r has
// fewer, or more.
type exactReader struct {
	r         io.Reader
	remaining int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.remaining == 0 {
		var one [1]byte
		if n, _ := io.ReadFull(e.r, one[:]); n > 0 {
			return 0, &sizeError{"body is longer than its declared size"}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.remaining {
		p = p[:e.remaining]
	}
	n, err := e.r.Read(p)
	e.remaining -= int64(n)
	switch {
	case err == io.EOF && e.remaining > 0:
		return n, &sizeError{"body is shorter than its declared size"}
	case e.remaining == 0 && err == nil:
		// Probe before handing over the last bytes: the transport stops
		// reading at the declared length, so an overlong body is only
		// caught here, and failing now aborts the request unfinished.
		var one [1]byte
		if m, _ := io.ReadFull(e.r, one[:]); m > 0 {
			return 0, &sizeError{"body is longer than its declared size"}
		}
	case err == io.EOF:
		err = nil
	}
	return n, err
}
