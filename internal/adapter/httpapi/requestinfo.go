package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

type requestKey struct{}

type requestInfoKey struct{}

// requestInfo is what the layers learn of a request on its way down, kept
// in its context by withRequestID: its id, and the route it was matched
// to (set by withRequest for the router's routes and by
// withGrantedDownloads for its own; "" until then), which observe reads
// once the handler has returned.
type requestInfo struct {
	id, route string
}

// infoOf is the requestInfo of a request's context (nil outside one).
func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// withRequest keeps the request in the handler's context, for the
// responses that need it (http.ServeContent), and records the route the
// router matched (r.Pattern) for observe, which would otherwise look it up
// again. Every generated route runs it.
func withRequest(f api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		setRoute(r, r.Pattern)
		return f(context.WithValue(ctx, requestKey{}, r), w, r, req)
	}
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
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, &requestInfo{id: id})))
	})
}

func requestID(r *http.Request) string { return RequestIDFrom(r.Context()) }

// setRoute records route as the request's route, for observe.
func setRoute(r *http.Request, route string) {
	if info := infoOf(r.Context()); info != nil {
		info.route = route
	}
}
