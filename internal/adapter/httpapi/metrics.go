package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// requestMetrics counts requests by route pattern and status, their
// latency, and the bytes in and out.
type requestMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// bytesIn and bytesOut are uploadedfile_http_bytes_total's two
	// series, resolved once rather than looked up on every request.
	bytesIn, bytesOut prometheus.Counter
	// series holds each route and status's series (seriesKey to
	// routeSeries), resolved once: a vector's WithLabelValues hashes its
	// labels and takes a lock on every call. Routes are the mux's patterns
	// and status codes a handful, so it stays small.
	series sync.Map
}

// seriesKey names one route and status's series.
type seriesKey struct {
	route string
	code  int
}

// routeSeries is one route and status's request counter and the route's
// latency histogram.
type routeSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// seriesOf is route and code's series, resolved on first use.
func (m *requestMetrics) seriesOf(route string, code int) routeSeries {
	k := seriesKey{route: route, code: code}
	if s, ok := m.series.Load(k); ok {
		return s.(routeSeries)
	}
	s := routeSeries{requests: m.requests.WithLabelValues(route, strconv.Itoa(code)), latency: m.latency.WithLabelValues(route)}
	m.series.Store(k, s)
	return s
}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "uploadedfile_http_bytes_total", Help: "HTTP body bytes received (in) and sent (out)."}, []string{"direction"})
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "uploadedfile_http_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "code"}),
		latency:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "uploadedfile_http_request_duration_seconds", Help: "HTTP request latency by route.", Buckets: prometheus.DefBuckets}, []string{"route"}),
		bytesIn:  bytes.WithLabelValues("in"),
		bytesOut: bytes.WithLabelValues("out"),
	}
	reg.MustRegister(m.requests, m.latency, bytes)
	return m
}

// observe measures every request and writes its access line: route (the
// pattern mux routes it to, or "unmatched"), status, duration, bytes in
// and out, request id and trace id -- never the query (a signed target's
// signature) nor a header (a token). It sits outside the guard, so a 401 is
// counted like any answer. m nil: no metrics; log nil: no access line.
func observe(next http.Handler, mux *http.ServeMux, m *requestMetrics, log accessLog) http.Handler {
	if m == nil && log == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		var in int64
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &countingBody{ReadCloser: r.Body, n: &in}
		}
		next.ServeHTTP(sw, r)
		elapsed := time.Since(start)
		route := routeOf(r, mux)
		if m != nil {
			s := m.seriesOf(route, sw.code)
			s.requests.Inc()
			s.latency.Observe(elapsed.Seconds())
			m.bytesIn.Add(float64(in))
			m.bytesOut.Add(float64(sw.n))
		}
		if log != nil {
			log.write(r.Context(), access{
				at: start.Add(elapsed), method: r.Method, route: route, status: sw.code, elapsed: elapsed,
				bytesIn: in, bytesOut: sw.n, requestID: requestID(r), traceID: traceID(r),
			})
		}
	})
}

// routeOf is the route pattern r was answered on: the one its handler
// recorded (handled) or, for a request answered before one did (a 401, a
// request whose parameters did not bind), the one mux routes it to;
// "unmatched" for none.
func routeOf(r *http.Request, mux *http.ServeMux) string {
	route := ""
	if info := infoOf(r.Context()); info != nil {
		route = info.route
	}
	if route == "" {
		_, route = mux.Handler(r)
	}
	if route == "" || route == "/" {
		return "unmatched"
	}
	return route
}

// traceID is the request's trace id ("" outside a trace).
func traceID(r *http.Request) string {
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// statusWriter records the status and the bytes written, keeping
// io.ReaderFrom (sendfile) and the response controller working.
type statusWriter struct {
	http.ResponseWriter
	code  int
	n     int64
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.wrote = true
	n, err := s.ResponseWriter.Write(p)
	s.n += int64(n)
	return n, err
}

// ReadFrom lets http.ServeContent's io.Copy reach the connection's
// sendfile path.
func (s *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	s.wrote = true
	var n int64
	var err error
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{s.ResponseWriter}, r)
	}
	s.n += n
	return n, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

type countingBody struct {
	io.ReadCloser
	n *int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	*b.n += int64(n)
	return n, err
}
