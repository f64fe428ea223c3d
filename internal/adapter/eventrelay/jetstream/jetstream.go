// Package jetstream is the event relay's NATS JetStream sink: each event is
// published as a structured-mode CloudEvent on <prefix>.<tenant>.<type>,
// with Nats-Msg-Id set to the event id so the stream drops a redelivery
// within its duplicate window.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
)

// Config configures a JetStream sink.
type Config struct {
	// URL is the NATS server (nats://host:port; credentials, if any, in
	// the URL).
	URL string
	// SubjectPrefix starts every subject (default uploadedfile).
	SubjectPrefix string
	// Stream is the stream that captures <prefix>.>, created when missing
	// (default UPLOADEDFILE_EVENTS).
	Stream string
	// Duplicates is the stream's duplicate window for a stream this sink
	// creates (default 10 minutes, longer than a relay lease).
	Duplicates time.Duration
	// Timeout bounds connecting and each publish acknowledgement (default
	// 10s).
	Timeout time.Duration
}

// Sink publishes events to a JetStream stream.
type Sink struct {
	nc      *nats.Conn
	js      js.JetStream
	cfg     Config
	prefix  string
	timeout time.Duration

	mu     sync.Mutex
	stream bool // the stream is known to exist
}

// New checks c and starts connecting (in the background: a server that is
// down is retried, and deliveries fail until it is up). The stream is
// created on the first delivery when it does not exist. Close the sink when
// done.
func New(ctx context.Context, c Config) (*Sink, error) {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = "uploadedfile"
	}
	if c.Stream == "" {
		c.Stream = "UPLOADEDFILE_EVENTS"
	}
	if c.Duplicates <= 0 {
		c.Duplicates = 10 * time.Minute
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if !validPrefix(c.SubjectPrefix) {
		return nil, fmt.Errorf("jetstream: subject prefix %q: letters, digits, - and _ in dot-separated tokens", c.SubjectPrefix)
	}
	nc, err := nats.Connect(c.URL, nats.Timeout(c.Timeout), nats.Name("uploadedfile events relay"),
		nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect: %w", err)
	}
	j, err := js.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &Sink{nc: nc, js: j, cfg: c, prefix: c.SubjectPrefix, timeout: c.Timeout}
	if err := s.ensureStream(ctx); err != nil && nc.IsConnected() {
		nc.Close()
		return nil, err // connected, but the stream cannot be made: a configuration error
	}
	return s, nil
}

// ensureStream creates the stream when it is missing; an existing stream
// is used as it is (its subjects must cover <prefix>.>).
func (s *Sink) ensureStream(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream {
		return nil
	}
	c := s.cfg
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	_, err := s.js.Stream(ctx, c.Stream)
	if errors.Is(err, js.ErrStreamNotFound) {
		_, err = s.js.CreateStream(ctx, js.StreamConfig{
			Name: c.Stream, Subjects: []string{c.SubjectPrefix + ".>"}, Duplicates: c.Duplicates, Storage: js.FileStorage,
		})
		if errors.Is(err, js.ErrStreamNameAlreadyInUse) {
			err = nil // another replica created it first
		}
	}
	if err != nil {
		return fmt.Errorf("jetstream: stream %s: %w", c.Stream, err)
	}
	s.stream = true
	return nil
}

// Close closes the connection.
func (s *Sink) Close() { s.nc.Close() }

// Subject is where an event is published: <prefix>.<tenant>.<type>, the
// tenant escaped to one subject token (see Token).
func (s *Sink) Subject(e eventrelay.Event) string {
	return s.prefix + "." + Token(e.Tenant) + "." + e.Type
}

// Deliver publishes the events asynchronously, then waits for their
// acknowledgements in order; it reports how many from the first were
// acknowledged (a duplicate acknowledgement counts: the stream has it).
func (s *Sink) Deliver(ctx context.Context, events []eventrelay.Event) (int, error) {
	if err := s.ensureStream(ctx); err != nil {
		return 0, err
	}
	futures := make([]js.PubAckFuture, 0, len(events))
	for _, e := range events {
		msg := nats.NewMsg(s.Subject(e))
		msg.Data = e.JSON
		msg.Header.Set("Content-Type", eventrelay.ContentType)
		f, err := s.js.PublishMsgAsync(msg, js.WithMsgID(e.ID))
		if err != nil {
			return s.wait(ctx, futures, err)
		}
		futures = append(futures, f)
	}
	return s.wait(ctx, futures, nil)
}

// wait collects the acknowledgements of futures in order; then is the
// error that stopped publishing, if any.
func (s *Sink) wait(ctx context.Context, futures []js.PubAckFuture, then error) (int, error) {
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return i, err
		case <-timer.C:
			return i, context.DeadlineExceeded
		case <-ctx.Done():
			return i, ctx.Err()
		}
	}
	return len(futures), then
}

// Token escapes s to one NATS subject token: letters, digits, - and _ stay,
// every other byte becomes %XX (so a tenant code never adds a token or a
// wildcard).
func Token(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	if b.Len() == 0 {
		return "%"
	}
	return b.String()
}

// validPrefix: dot-separated tokens of letters, digits, - and _.
func validPrefix(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for _, c := range part {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
