// Package uploader uploads files to an uploadedfile server over its HTTP
// API, through the client generated from the OpenAPI document (gen/client),
// so that Go callers of the HTTP API do not hand-roll the lifecycle:
//
//   - Upload runs a direct upload: initiate, send the bytes to the returned
//     target with exactly its method, URL and headers, complete;
//   - ResumableUpload sends a file in chunks over the resumable route (tus),
//     going on from the server's offset after a dropped connection, or
//     after the caller itself stopped (with the upload's URL);
//   - BufferUpload sends a small file in one multipart request;
//   - Delete deletes a file.
//
// Every write carries an Idempotency-Key derived from one key per logical
// upload, and every retryable answer (503 and 409 with their Retry-After, a
// network error) is retried with backoff and jitter under the same key: a
// retry after a lost answer never makes a second file. A refusal is an
// *Error with the problem's stable code and rule.
package uploader

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"mime/multipart"
	"net/http"
	"strconv"
	"sync"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/uploadedfile/uploadedfile/gen/client"
)

// Client uploads through one server with one token source.
type Client struct {
	api     *client.ClientWithResponses
	http    *http.Client
	retries int
	backoff time.Duration
	base    string                                // the server's base URL
	token   func(context.Context) (string, error) // the bearer token source
}

// Option adjusts a Client.
type Option func(*Client)

// WithHTTPClient sends every request (the API's and the upload target's)
// with hc (default http.DefaultClient).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetries sets how many times a retryable answer is retried (default
// 4), and the first backoff (default 500 ms, doubled per retry up to 10 s,
// with full jitter; a Retry-After of the server wins). A 409 saying the
// key's earlier attempt still holds the claim (in flight, completing) is
// waited out besides, for up to 75 s: that attempt finishes, or, if its
// server died, its lease runs out.
func WithRetries(n int, first time.Duration) Option {
	return func(c *Client) { c.retries, c.backoff = n, first }
}

// New returns a Client of the server at baseURL; token is called for every
// request and returns the bearer token to send.
func New(baseURL string, token func(context.Context) (string, error), opts ...Option) (*Client, error) {
	c := &Client{http: http.DefaultClient, retries: 4, backoff: 500 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	api, err := client.NewClientWithResponses(baseURL, client.WithHTTPClient(c.http), client.WithRequestEditorFn(func(ctx context.Context, r *http.Request) error {
		tok, err := token(ctx)
		if err != nil {
			return fmt.Errorf("uploader: token: %w", err)
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		return nil
	}))
	if err != nil {
		return nil, fmt.Errorf("uploader: %w", err)
	}
	return &Client{api: api, http: c.http, retries: c.retries, backoff: c.backoff, base: baseURL, token: token}, nil
}

// File is what Upload sends.
type File struct {
	// Name is the original name; its extension must match ContentType.
	Name        string
	ContentType string
	// Body is read twice: once for its checksum, once to send it (and
	// again for a retry of the send); Size is its length.
	Body io.ReadSeeker
	Size int64
	// Temporary: private, expiring 24 hours after completion.
	Temporary bool
	// Key is the upload's Idempotency-Key (default a random one): pass
	// the key of an upload whose first try failed to continue it.
	Key string
}

// Error is a refused or failed request: the HTTP status and the problem's
// stable code, the rule an upload broke, and whether the same call can
// succeed later.
type Error struct {
	Status    int
	Code      string
	Rule      string
	Retryable bool
}

func (e *Error) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("uploader: %d %s (%s)", e.Status, e.Code, e.Rule)
	}
	return fmt.Sprintf("uploader: %d %s", e.Status, e.Code)
}

// Upload runs the direct lifecycle for f and returns the ready file.
func (c *Client) Upload(ctx context.Context, f File) (*client.UploadedFile, error) {
	key := f.Key
	if key == "" {
		key = newKey()
	}
	sum, err := checksum(f.Body)
	if err != nil {
		return nil, err
	}
	input := client.InitiateUploadInput{OriginalName: f.Name, ContentType: f.ContentType, SizeBytes: f.Size, Checksum: sum}
	var init *client.InitiatedUpload
	err = c.retry(ctx, func() (int, []byte, http.Header, error) {
		if f.Temporary {
			r, err := c.api.InitiateTemporaryUploadWithResponse(ctx, &client.InitiateTemporaryUploadParams{IdempotencyKey: ptr(key + ".initiate")}, client.InitiateTemporaryUploadJSONRequestBody(input))
			if err != nil {
				return 0, nil, nil, err
			}
			init = r.JSON201
			return r.StatusCode(), r.Body, r.HTTPResponse.Header, nil
		}
		r, err := c.api.InitiateUploadWithResponse(ctx, &client.InitiateUploadParams{IdempotencyKey: ptr(key + ".initiate")}, input)
		if err != nil {
			return 0, nil, nil, err
		}
		init = r.JSON201
		return r.StatusCode(), r.Body, r.HTTPResponse.Header, nil
	})
	if err != nil {
		return nil, err
	}
	if err := c.retry(ctx, func() (int, []byte, http.Header, error) { return c.send(ctx, init.Upload, f) }); err != nil {
		return nil, err
	}
	var done *client.UploadedFile
	err = c.retry(ctx, func() (int, []byte, http.Header, error) {
		r, err := c.api.CompleteUploadWithResponse(ctx, init.Id, &client.CompleteUploadParams{IdempotencyKey: ptr(key + ".complete")})
		if err != nil {
			return 0, nil, nil, err
		}
		done = r.JSON200
		return r.StatusCode(), r.Body, r.HTTPResponse.Header, nil
	})
	return done, err
}

// send writes f's bytes to the upload target. A target already written
// (a retry whose first send's answer was lost) counts as sent: complete
// verifies what is there.
func (c *Client) send(ctx context.Context, t client.UploadTarget, f File) (int, []byte, http.Header, error) {
	if _, err := f.Body.Seek(0, io.SeekStart); err != nil {
		return 0, nil, nil, fmt.Errorf("uploader: rewind the body: %w", err)
	}
	body := &attemptBody{r: io.LimitReader(f.Body, f.Size)}
	defer func() { _ = body.Close() }() // before the next attempt rewinds f.Body
	req, err := http.NewRequestWithContext(ctx, t.Method, t.Url, body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("uploader: %w", err)
	}
	req.ContentLength = f.Size
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusPreconditionFailed || bytes.Contains(answer, []byte(`"rule":"content.already-written"`)) {
		return http.StatusOK, nil, resp.Header, nil // S3's If-None-Match, the local target's rule: written before
	}
	return resp.StatusCode, answer, resp.Header, nil
}

// errAttemptOver ends the reads of a send whose answer came back before
// its body was sent.
var errAttemptOver = errors.New("uploader: this attempt's body is closed")

// attemptBody is one send's view of the caller's body. net/http may go on
// reading a request's body after Do returned (an answer that came before
// the body was all sent), so each attempt reads through a guard of its
// own: Close, which waits for a read in progress, ends the attempt's
// reads before the next attempt rewinds the body.
type attemptBody struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (b *attemptBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errAttemptOver
	}
	return b.r.Read(p)
}

// Close ends the attempt's reads (the transport closes it too).
func (b *attemptBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// BufferUpload sends a small file (at most the server's size limit; it is
// held in memory for retries) in one multipart request, and returns the
// ready file.
func (c *Client) BufferUpload(ctx context.Context, name string, body io.Reader) (*client.UploadedFile, error) {
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	part, err := w.CreateFormFile("file", name)
	if err != nil {
		return nil, fmt.Errorf("uploader: %w", err)
	}
	if _, err := io.Copy(part, body); err != nil {
		return nil, fmt.Errorf("uploader: read the body: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("uploader: %w", err)
	}
	key := newKey()
	var done *client.UploadedFile
	err = c.retry(ctx, func() (int, []byte, http.Header, error) {
		//lint:ignore SA1019 the multipart route is deprecated for browsers; a small server-side upload in one request is what it is for
		r, err := c.api.UploadFileWithBodyWithResponse(ctx, &client.UploadFileParams{IdempotencyKey: &key}, w.FormDataContentType(), bytes.NewReader(form.Bytes()))
		if err != nil {
			return 0, nil, nil, err
		}
		done = r.JSON201
		return r.StatusCode(), r.Body, r.HTTPResponse.Header, nil
	})
	return done, err
}

// Delete deletes the file id (its bytes go with it, durably), under one
// Idempotency-Key for all its retries: a retry after a lost answer is
// answered as the first try was, never 404. Deleting a file that does not
// exist (or is another tenant's) is an *Error with status 404.
func (c *Client) Delete(ctx context.Context, id openapi_types.UUID) error {
	key := newKey()
	return c.retry(ctx, func() (int, []byte, http.Header, error) {
		r, err := c.api.DeleteFileWithResponse(ctx, id, &client.DeleteFileParams{IdempotencyKey: &key})
		if err != nil {
			return 0, nil, nil, err
		}
		return r.StatusCode(), r.Body, r.HTTPResponse.Header, nil
	})
}

// retry runs call until it succeeds (2xx) or fails for good: a network
// error, a 503 or a 409, and a 502 or 504 (a proxy or load balancer whose
// upstream died or timed out: every write carries its Idempotency-Key, so
// sending it again is safe) is retried up to c.retries times, after the
// answer's Retry-After or a jittered, doubling backoff; any other answer
// is an *Error. A 409 that says the key's earlier attempt still holds the
// claim (heldClaim) is waited out for up to heldBudget without counting
// against the retries.
func (c *Client) retry(ctx context.Context, call func() (status int, body []byte, h http.Header, err error)) error {
	var held time.Time // when the first answer naming a held claim came
	waited := 0        // attempts spent waiting out a held claim
	for attempt := 0; ; attempt++ {
		status, body, h, err := call()
		if err == nil && status >= 200 && status < 300 {
			return nil
		}
		retryable := err != nil || status == http.StatusServiceUnavailable || status == http.StatusConflict ||
			status == http.StatusBadGateway || status == http.StatusGatewayTimeout
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && heldClaim(status, body) {
			// The same key's earlier attempt holds the claim: it finishes,
			// or, if its server died, its lease runs out. Waiting for it is
			// part of this call, not a retry of a failure.
			if held.IsZero() {
				held = time.Now()
			}
			if time.Since(held) < heldBudget {
				waited++
			}
		}
		if !retryable || attempt-waited >= c.retries {
			if err != nil {
				return fmt.Errorf("uploader: %w", err)
			}
			return problem(status, body)
		}
		wait := c.backoff << min(attempt, 16)
		wait = min(wait, 10*time.Second)
		wait = time.Duration(mathrand.Int64N(int64(wait) + 1))
		if s, perr := strconv.Atoi(h.Get("Retry-After")); perr == nil && s > 0 {
			wait = min(time.Duration(s)*time.Second, 10*time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// heldBudget is how long a call waits out a claim its key's earlier
// attempt holds: longer than the server's leases of a key in flight and
// of a completion (30 s each), so the claim of an attempt whose server
// died has run out by then.
const heldBudget = 75 * time.Second

// heldClaim reports whether an answer says the key's earlier attempt
// holds the request (409 core.idempotency.in-flight) or the completion
// (409 core.file.upload-completing).
func heldClaim(status int, body []byte) bool {
	if status != http.StatusConflict {
		return false
	}
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code == "core.idempotency.in-flight" || p.Code == "core.file.upload-completing"
}

// problem is the *Error of an answer's problem body.
func problem(status int, body []byte) error {
	var p struct {
		Code      string `json:"code"`
		Rule      string `json:"rule"`
		Retryable *bool  `json:"retryable"`
	}
	_ = json.Unmarshal(body, &p)
	if p.Code == "" {
		p.Code = "http." + strconv.Itoa(status)
	}
	return &Error{Status: status, Code: p.Code, Rule: p.Rule, Retryable: p.Retryable != nil && *p.Retryable}
}

// checksum is "sha256:<base64>" of r from its start.
func checksum(r io.ReadSeeker) (string, error) {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("uploader: rewind the body: %w", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", fmt.Errorf("uploader: read the body: %w", err)
	}
	return "sha256:" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// newKey is a random Idempotency-Key.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ptr[T any](v T) *T { return &v }

// IsRetryable reports whether err is worth trying again later.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable
}
