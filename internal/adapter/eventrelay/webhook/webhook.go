// Package webhook is the event relay's webhook sink: each event is POSTed
// as a structured-mode CloudEvent, signed per the Standard Webhooks scheme
// (https://www.standardwebhooks.com): webhook-id is the event id,
// webhook-timestamp the Unix time of the attempt, webhook-signature
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" under the sink's secret.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
)

// Config configures a webhook sink.
type Config struct {
	// URL receives the POSTs (http or https).
	URL string
	// Secret is the signing secret in the Standard Webhooks form:
	// "whsec_" followed by base64 of 24 to 64 random bytes.
	Secret string
	// Timeout bounds one attempt, the response included (default 10s).
	Timeout time.Duration
	// Transport carries the requests (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
}

// Sink POSTs events to one URL.
type Sink struct {
	url     string
	key     []byte
	timeout time.Duration
	client  *http.Client
	now     func() time.Time
}

// ErrConfig reports an invalid webhook configuration.
var ErrConfig = errors.New("webhook: invalid configuration")

// New checks c and returns the sink. Redirects are not followed: a 3xx
// answer is a failed attempt.
func New(c Config) (*Sink, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: url must be an absolute http or https URL", ErrConfig)
	}
	key, err := DecodeSecret(c.Secret)
	if err != nil {
		return nil, err
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	tr := c.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &Sink{
		url: c.URL, key: key, timeout: c.Timeout, now: time.Now,
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// DecodeSecret decodes a "whsec_<base64>" secret to its key bytes.
func DecodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, fmt.Errorf("%w: the secret must start with whsec_", ErrConfig)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("%w: the secret must be whsec_ and base64 of 24 to 64 bytes", ErrConfig)
	}
	return key, nil
}

// MaxInFlight implements eventrelay.InFlightLimiter: each POST is
// acknowledged by its own answer, so the relay moves its cursor after
// every event and a relay killed mid-batch sends again only the POST that
// was in flight (and no older event of a file after a newer one).
func (s *Sink) MaxInFlight() int { return 1 }

// Deliver POSTs the events one after another and stops at the first that
// is not answered 2xx within the timeout.
func (s *Sink) Deliver(ctx context.Context, events []eventrelay.Event) (int, error) {
	for i, e := range events {
		if err := s.post(ctx, e); err != nil {
			return i, err
		}
	}
	return len(events), nil
}

func (s *Sink) post(ctx context.Context, e eventrelay.Event) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(e.JSON))
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(s.now().Unix(), 10)
	req.Header.Set("Content-Type", eventrelay.ContentType)
	req.Header.Set("webhook-id", e.ID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+Sign(s.key, e.ID, ts, e.JSON))
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &eventrelay.StatusError{Code: resp.StatusCode}
	}
	return nil
}

// Sign is the Standard Webhooks v1 signature: base64 of HMAC-SHA256 over
// "<id>.<timestamp>.<body>".
func Sign(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
