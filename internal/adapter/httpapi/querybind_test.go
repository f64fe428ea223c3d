package httpapi

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	api "github.com/uploadedfile/uploadedfile/gen/api"
)

// boundParams records what an operation was called with, or the error its
// parameters were refused with.
type boundParams struct {
	api.ServerInterface // nil: the other operations are never called
	params              any
	err                 error
}

func (b *boundParams) ListFiles(_ http.ResponseWriter, _ *http.Request, p api.ListFilesParams) {
	b.params = p
}

func (b *boundParams) HostListFiles(_ http.ResponseWriter, _ *http.Request, p api.HostListFilesParams) {
	b.params = p
}

// downloadParams is what DownloadFile was called with.
type downloadParams struct {
	id     api.FileID
	params api.DownloadFileParams
}

func (b *boundParams) DownloadFile(_ http.ResponseWriter, _ *http.Request, id api.FileID, p api.DownloadFileParams) {
	b.params = downloadParams{id: id, params: p}
}

// listQueries are query strings a list route may be sent: each parameter
// well formed, malformed, empty, repeated, escaped, unknown; and seeded
// random mixes of them.
func listQueries() []string {
	values := map[string][]string{
		"limit":         {"50", "0", "-1", "abc", "", "1e3", "99999999999999999999", "7%20"},
		"cursor":        {"abc", "a%2Fb", "", "%zz"},
		"sort":          {"createdAt", "-sizeBytes", "", "nonsense"},
		"module":        {"crm", "", "%E2%9C%93"},
		"entity":        {"invoice", ""},
		"entityId":      {"inv-7", "a+b"},
		"contentType":   {"image/png", "image%2F*"},
		"visibility":    {"public", "private", "x"},
		"temporary":     {"true", "false", "1", "maybe", ""},
		"createdFrom":   {"2026-11-01T00:00:00Z", "2026-11-01T00:00:00%2B01:00", "yesterday", "2026-11-01", ""},
		"createdBefore": {"2026-11-29T12:30:00.5Z", "0", ""},
		"namePrefix":    {"report", "%E2%9C%93", "%"},
		"withUrls":      {"true", "TRUE", "no"},
		"unknown":       {"1"},
	}
	names := make([]string, 0, len(values))
	qs := []string{"", "limit=50;x", "&&", "=1", "limit", "withUrls"}
	for name, vs := range values {
		names = append(names, name)
		for _, v := range vs {
			qs = append(qs, name+"="+v, name+"="+v+"&"+name+"="+vs[0])
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var parts []string
		for range 1 + rng.IntN(6) {
			name := names[rng.IntN(len(names))]
			parts = append(parts, name+"="+values[name][rng.IntN(len(values[name]))])
		}
		qs = append(qs, strings.Join(parts, "&"))
	}
	return qs
}

// binderPair serves one list route twice: through the generated wrapper
// and through the one parse.
type binderPair struct {
	path                         string
	generated, ours              *boundParams
	generatedHandler, ourHandler http.Handler
}

func newBinderPair(t testing.TB, path string) *binderPair {
	p := &binderPair{path: path, generated: &boundParams{}, ours: &boundParams{}}
	serve := func(b *boundParams) http.Handler {
		opts := api.StdHTTPServerOptions{ErrorHandlerFunc: func(_ http.ResponseWriter, _ *http.Request, err error) { b.err = err }}
		mux := http.NewServeMux()
		opts.BaseRouter = mux
		if b == p.ours {
			bound, err := newBoundRoutes(mux, b, opts)
			require.NoError(t, err)
			opts.BaseRouter = bound
			defer func() { require.Equal(t, 3, bound.replaced, "the list routes and the download registered") }()
		}
		return api.HandlerWithOptions(b, opts)
	}
	p.generatedHandler, p.ourHandler = serve(p.generated), serve(p.ours)
	return p
}

// agree sends the raw query q to both and requires the same parameters,
// or the same error for the same parameter; it reports whether q was
// refused.
func (p *binderPair) agree(t testing.TB, q string) bool {
	*p.generated, *p.ours = boundParams{}, boundParams{}
	for _, h := range []http.Handler{p.generatedHandler, p.ourHandler} {
		r := httptest.NewRequest(http.MethodGet, p.path, nil)
		r.URL.RawQuery = q
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	require.Equal(t, p.generated.params, p.ours.params, "%s?%s", p.path, q)
	require.Equal(t, fmt.Sprintf("%T %v", p.generated.err, p.generated.err), fmt.Sprintf("%T %v", p.ours.err, p.ours.err), "%s?%s", p.path, q)
	return p.generated.err != nil
}

// TestQueryBinderBindsAsTheGeneratedWrapper holds the list routes' one
// parse to the generated wrappers': for every query, the same parameters,
// or the same error for the same parameter.
func TestQueryBinderBindsAsTheGeneratedWrapper(t *testing.T) {
	for _, path := range []string{"/uploaded-file", "/internal/uploaded-file"} {
		pair := newBinderPair(t, path)
		refused := 0
		for _, q := range listQueries() {
			if pair.agree(t, q) {
				refused++
			}
		}
		require.Positive(t, refused, "some queries refused")
	}
}

// TestDownloadBinderBindsAsTheGeneratedWrapper holds the download's one
// parse to its generated wrapper: for every id and query, the same id and
// parameters, or the same error for the same parameter (a bad id before a
// bad query).
func TestDownloadBinderBindsAsTheGeneratedWrapper(t *testing.T) {
	pair := newBinderPair(t, "")
	ids := []string{"0b9e6b0c-5d1e-4c2a-9f43-6f2b1d8c7a10", "0B9E6B0C-5D1E-4C2A-9F43-6F2B1D8C7A10", "0b9e6b0c5d1e4c2a9f436f2b1d8c7a10",
		"{0b9e6b0c-5d1e-4c2a-9f43-6f2b1d8c7a10}", "urn:uuid:0b9e6b0c-5d1e-4c2a-9f43-6f2b1d8c7a10", "abc", "%20", "0b9e6b0c-5d1e-4c2a-9f43-6f2b1d8c7a1%C3%A9"}
	queries := []string{"", "expires=1767225600", "expires=abc", "expires=", "expires=1&expires=2", "grant=abc", "grant=",
		"grant=a&grant=b", "expires=1767225600&grant=sealed", "expires=-5&grant=x", "expires=99999999999999999999", "other=1", "&&", "expires"}
	refused := 0
	for _, id := range ids {
		pair.path = "/uploaded-file/" + id + "/download"
		for _, q := range queries {
			if pair.agree(t, q) {
				refused++
			}
		}
	}
	require.Positive(t, refused, "some requests refused")
	require.Less(t, refused, len(ids)*len(queries), "some requests bound")
}

// FuzzQueryBinder holds the one parse to the generated wrappers on any
// raw query string, for both list routes (make fuzz explores; make test
// runs the seeds).
func FuzzQueryBinder(f *testing.F) {
	for i, q := range listQueries() {
		if i%20 == 0 {
			f.Add(q)
		}
	}
	f.Add("limit=5&limit=6&sort=name&namePrefix=a%00b")
	f.Add("withUrls=true&createdFrom=2026-11-01T00:00:00.999999999Z")
	pairs := []*binderPair{newBinderPair(f, "/uploaded-file"), newBinderPair(f, "/internal/uploaded-file")}
	f.Fuzz(func(t *testing.T, q string) {
		for _, pair := range pairs {
			pair.agree(t, q)
		}
	})
}

// TestQueryBinderRefusesAStructThatSkipsAParameter holds the binder to the
// contract: parameters without a field, and fields without a parameter,
// are refused when it is built.
func TestQueryBinderRefusesAStructThatSkipsAParameter(t *testing.T) {
	doc, err := api.GetSpec()
	require.NoError(t, err)
	type fewer struct {
		Limit *int `form:"limit,omitempty"`
	}
	_, err = newQueryBinder[fewer](doc, http.MethodGet, "/uploaded-file")
	require.ErrorContains(t, err, "has no field for the query parameter cursor")
	type more struct {
		api.ListFilesParams
	}
	_, err = newQueryBinder[more](doc, http.MethodGet, "/uploaded-file")
	require.ErrorContains(t, err, "names no query parameter")
	list := reflect.TypeFor[api.ListFilesParams]()
	fields := []reflect.StructField{{Name: "Other", Type: reflect.TypeFor[*int](), Tag: `form:"other,omitempty"`}}
	for i := range list.NumField() {
		fields = append(fields, list.Field(i))
	}
	_, err = queryParamsOf(doc, reflect.StructOf(fields), http.MethodGet, "/uploaded-file")
	require.ErrorContains(t, err, "field for other is no query parameter")
	params, err := queryParamsOf(doc, reflect.StructOf(fields[1:]), http.MethodGet, "/uploaded-file")
	require.NoError(t, err)
	require.Len(t, params, list.NumField())
	_, err = newQueryBinder[api.ListFilesParams](doc, http.MethodGet, "/uploaded-file/{id}")
	require.ErrorContains(t, err, "takes id in the path")
}

// BenchmarkListQueryBinding is a record's list query bound by the
// generated wrapper (a parse per parameter) and by the one parse.
func BenchmarkListQueryBinding(b *testing.B) {
	q := "entity=invoice&entityId=inv-7&withUrls=true"
	for _, name := range []string{"generated", "one parse"} {
		b.Run(name, func(b *testing.B) {
			p := &boundParams{}
			opts := api.StdHTTPServerOptions{ErrorHandlerFunc: func(http.ResponseWriter, *http.Request, error) {}}
			mux := http.NewServeMux()
			opts.BaseRouter = mux
			if name != "generated" {
				bound, err := newBoundRoutes(mux, p, opts)
				require.NoError(b, err)
				opts.BaseRouter = bound
			}
			h := api.HandlerWithOptions(p, opts)
			r := httptest.NewRequest(http.MethodGet, "/uploaded-file?"+q, nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
			require.Equal(b, "inv-7", string(*p.params.(api.ListFilesParams).EntityId))
		})
	}
}
