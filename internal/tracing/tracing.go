// Package tracing sets up OpenTelemetry traces for the server: an OTLP/HTTP
// exporter when tracing.endpoint is set (and nothing at all when it is not:
// no provider, no wrappers, no cost), a pgx tracer that makes one span per
// SQL statement named after its sqlc query, and a log handler that adds the
// trace and span ids to every log line written inside a span.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Config configures tracing.
type Config struct {
	// Endpoint is the OTLP/HTTP traces endpoint, for example
	// http://127.0.0.1:4318/v1/traces; empty turns tracing off.
	Endpoint string
	// ServiceName is the service.name resource attribute (default
	// uploadedfile).
	ServiceName string
}

// New returns a tracer provider exporting to c.Endpoint in batches, or nil
// when c.Endpoint is empty. Shut it down to flush.
func New(ctx context.Context, c Config) (*sdktrace.TracerProvider, error) {
	if c.Endpoint == "" {
		return nil, nil
	}
	if c.ServiceName == "" {
		c.ServiceName = "uploadedfile"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(c.Endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing.endpoint: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(c.ServiceName))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// queryName reads the sqlc query name a statement starts with.
var queryName = regexp.MustCompile(`^-- name: (\w+) :`)

// PGX is a pgx.QueryTracer and pgx.BatchTracer: one client span per
// statement (or batch of statements of one query), named after its
// sqlc query ("SQL" for a statement without one). The SQL text and its
// arguments are not recorded (they hold tenants, users and keys).
type PGX struct{ tracer trace.Tracer }

// NewPGX returns the pgx tracer of tp.
func NewPGX(tp trace.TracerProvider) *PGX {
	return &PGX{tracer: tp.Tracer("github.com/uploadedfile/uploadedfile/db")}
}

type spanKey struct{}

// TraceQueryStart implements pgx.QueryTracer.
func (p *PGX) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return p.start(ctx, data.SQL)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (p *PGX) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.Err, "statement failed")
}

// TraceBatchStart implements pgx.BatchTracer: one span per batch, named
// after its first statement's sqlc query (the service's batches run one
// query, for one or more uploads), with the number of statements.
func (p *PGX) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	sql := ""
	if qs := data.Batch.QueuedQueries; len(qs) > 0 {
		sql = qs[0].SQL
	}
	return p.start(ctx, sql, attribute.Int("db.operation.batch.size", data.Batch.Len()))
}

// TraceBatchQuery implements pgx.BatchTracer: a statement's failure is
// recorded on its batch's span.
func (p *PGX) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	span, ok := ctx.Value(spanKey{}).(trace.Span)
	if ok && data.Err != nil && !errors.Is(data.Err, pgx.ErrNoRows) {
		span.RecordError(data.Err)
	}
}

// TraceBatchEnd implements pgx.BatchTracer.
func (p *PGX) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, data.Err, "batch failed")
}

// start opens the client span of a statement (or batch) whose SQL is sql,
// named after its sqlc query.
func (p *PGX) start(ctx context.Context, sql string, attrs ...attribute.KeyValue) context.Context {
	name := "SQL"
	if m := queryName.FindStringSubmatch(sql); m != nil {
		name = m[1]
	}
	ctx, span := p.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append([]attribute.KeyValue{attribute.String("db.system", "postgresql")}, attrs...)...))
	return context.WithValue(ctx, spanKey{}, span)
}

// end closes the span start opened, failed with status for err (zero rows
// is an answer, not a failure).
func end(ctx context.Context, err error, status string) {
	span, ok := ctx.Value(spanKey{}).(trace.Span)
	if !ok {
		return
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		span.RecordError(err)
		span.SetStatus(codes.Error, status)
	}
	span.End()
}

// LogHandler adds trace_id and span_id to every record logged with a
// context inside a span, and request_id when RequestID finds one -- each
// unless the record names it itself (the access line carries its request
// and trace ids; a JSON line must not name a key twice).
type LogHandler struct {
	slog.Handler
	// RequestID reads the request id a context carries ("" for none).
	RequestID func(context.Context) string
}

// Handle implements slog.Handler.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !hasAttr(r, "trace_id") {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	if h.RequestID != nil && !hasAttr(r, "request_id") {
		if id := h.RequestID(ctx); id != "" {
			r.AddAttrs(slog.String("request_id", id))
		}
	}
	return h.Handler.Handle(ctx, r)
}

// hasAttr reports whether r carries an attribute named key (a line that
// names its request or trace id itself, such as the access line).
func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

// WithAttrs implements slog.Handler.
func (h LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return LogHandler{Handler: h.Handler.WithAttrs(attrs), RequestID: h.RequestID}
}

// WithGroup implements slog.Handler.
func (h LogHandler) WithGroup(name string) slog.Handler {
	return LogHandler{Handler: h.Handler.WithGroup(name), RequestID: h.RequestID}
}
