package httpapi

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"

	api "github.com/uploadedfile/uploadedfile/gen/api"
)

// RequestIDFrom is the request id of a request's context ("" outside one):
// for log lines written deeper down.
func RequestIDFrom(ctx context.Context) string {
	if info := infoOf(ctx); info != nil {
		return info.id
	}
	return ""
}

type requestInfoKey struct{}

// requestInfo is what the layers learn of a request on its way down, kept
// in its context by withRequestID: its id; the route it was matched to,
// which observe reads once the handler has returned; and the request as
// the handler received it, for the responses that need it
// (http.ServeContent). withRequest sets both for the router's routes and
// withGrantedDownloads for its own; until then the route is "" and the
// request nil.
type requestInfo struct {
	id, route string
	req       *http.Request
}

// infoOf is the requestInfo of a request's context (nil outside one).
func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// withRequest records the request and the route the router matched
// (r.Pattern) in its requestInfo (handled): for the responses that need
// the request, and for observe, which would otherwise look the route up
// again. Every generated route runs it.
func withRequest(f api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		handled(r, r.Pattern)
		return f(ctx, w, r, req)
	}
}

// requestOf is the request a handler received (nil outside one), as
// withRequest or withGrantedDownloads recorded it.
func requestOf(ctx context.Context) *http.Request {
	if info := infoOf(ctx); info != nil {
		return info.req
	}
	return nil
}

// withRequestID tags the request with an id for logs (the client's
// X-Request-Id when sane, else a random one). It is echoed only when the
// client sent one, so two responses never differ by a header the client
// did not choose.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id != "" && len(id) <= 128 {
			w.Header().Set("X-Request-Id", id)
		} else {
			id = newRequestID()
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, &requestInfo{id: id})))
	})
}

// newRequestID is a random request id of 16 hex digits. It names a
// request in the logs and guards nothing, so it comes from the runtime's
// generator (ChaCha8, seeded by the system) rather than a system call
// per request.
func newRequestID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

func requestID(r *http.Request) string { return RequestIDFrom(r.Context()) }

// handled records r as the request its handler received and route as its
// route, for observe.
func handled(r *http.Request, route string) {
	if info := infoOf(r.Context()); info != nil {
		info.route, info.req = route, r
	}
}
