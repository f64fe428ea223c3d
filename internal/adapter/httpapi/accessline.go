package httpapi

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// access is what observe measured of one request, for its access line.
type access struct {
	at                 time.Time // when the answer was done
	method, route      string
	status             int
	elapsed            time.Duration
	bytesIn, bytesOut  int64
	requestID, traceID string
}

// accessLog writes access lines: through a slog handler (slogAccess) or
// straight to a writer (lineAccess).
type accessLog interface {
	write(ctx context.Context, a access)
}

// slogAccess writes the access line as a slog record at INFO, "request",
// to the server's logger (Options.Logger) -- for hosts that route their
// logs through a handler of their own.
type slogAccess struct{ h slog.Handler }

// write hands the record to the handler itself, as slog's docs show for
// wrappers: Logger.LogAttrs would also walk the stack for the caller's pc
// (runtime.Callers, about 1 us a request), which no handler here prints.
func (s slogAccess) write(ctx context.Context, a access) {
	if !s.h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	rec := slog.NewRecord(a.at, slog.LevelInfo, "request", 0)
	rec.AddAttrs(slog.String("method", a.method), slog.String("route", a.route), slog.Int("status", a.status),
		slog.Float64("duration_ms", durationMS(a.elapsed)), slog.Int64("bytes_in", a.bytesIn), slog.Int64("bytes_out", a.bytesOut),
		slog.String("request_id", a.requestID), slog.String("trace_id", a.traceID))
	_ = s.h.Handle(ctx, rec) // a line that cannot be written is not the request's failure
}

// lineAccess writes the access line as one JSON line to w
// (Options.AccessLogWriter): the keys and values slog's JSON handler
// writes for slogAccess's record, in its order, appended directly. Through
// slog the line cost about 4 us of CPU on every request, most of it the
// handler's generic attribute walk and json.Marshal of the float
// duration; appended it costs a fraction of that (docs/performance-notes.md).
type lineAccess struct{ w io.Writer }

var accessBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (l lineAccess) write(_ context.Context, a access) {
	buf := accessBuffers.Get().(*[]byte)
	b := append((*buf)[:0], `{"time":`...)
	b = appendTime(b, a.at)
	b = append(b, `,"level":"INFO","msg":"request","method":`...)
	b = appendString(b, a.method)
	b = append(b, `,"route":`...)
	b = appendString(b, a.route)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(a.status), 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, durationMS(a.elapsed), 'f', -1, 64)
	b = append(b, `,"bytes_in":`...)
	b = strconv.AppendInt(b, a.bytesIn, 10)
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, a.bytesOut, 10)
	b = append(b, `,"request_id":`...)
	b = appendString(b, a.requestID)
	b = append(b, `,"trace_id":`...)
	b = appendString(b, a.traceID)
	b = append(b, "}\n"...)
	_, _ = l.w.Write(b) // as slogAccess: a line that cannot be written is not the request's failure
	*buf = b
	accessBuffers.Put(buf)
}

// durationMS is the access line's duration_ms: milliseconds with
// microsecond precision. A float64 of at most three decimals and under
// 1e21 is one encoding/json writes in 'f' format, as AppendFloat does.
func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
