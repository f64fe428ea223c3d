package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics counts requests by route pattern and status, their
// latency, and the bytes in and out.
type requestMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// bytesIn and bytesOut are uploadedfile_http_bytes_total's two
	// series, resolved once rather than looked up on every request.
	bytesIn, bytesOut prometheus.Counter
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

// wrap measures next; it must sit directly around the mux, whose match sets
// r.Pattern on the request it is given.
func (m *requestMetrics) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &countingBody{ReadCloser: r.Body, c: m.bytesIn}
		}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		m.bytesOut.Add(float64(sw.n))
	})
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
	c prometheus.Counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.Add(float64(n))
	return n, err
}
