package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/runtime"

	api "github.com/uploadedfile/uploadedfile/gen/api"
)

// The generated wrapper of an operation parses the query string once per
// parameter it binds: thirteen times for a list, about 3 % of the CPU of
// a record's page in process and 60 of its 508 allocations. The list
// routes bind their parameters from one parse
// instead (queryBinder), by the rules the contract gives each parameter
// and through the same runtime function the wrapper calls, so they accept,
// refuse and name errors exactly as the wrapper does
// (TestQueryBinderBindsAsTheGeneratedWrapper) and follow any parameter the
// contract adds without a change here.

// queryBinder binds an operation's query parameters into its generated
// parameter struct P from one parse of the query string.
type queryBinder[P any] struct {
	params []queryParam
}

// queryParam is one query parameter as the contract declares it, and the
// index of the field of P its `form` tag names.
type queryParam struct {
	name     string
	style    string
	explode  bool
	required bool
	opts     runtime.BindQueryParameterOptions
	field    int
	// absentIsNil: an optional value of its own key, which the runtime
	// leaves unset, without an error, when the query lacks the key; bind
	// skips it then rather than build the reflection to learn so.
	absentIsNil bool
}

// newQueryBinder reads the query parameters of method on path in doc. It
// fails when the operation takes a parameter elsewhere than in the query
// (but the path parameters named in inPath, which the route binds
// itself), or when the parameters and P's fields do not name each other
// one to one: a binder that would skip a parameter is never built.
func newQueryBinder[P any](doc *openapi3.T, method, path string, inPath ...string) (*queryBinder[P], error) {
	params, err := queryParamsOf(doc, reflect.TypeFor[P](), method, path, inPath...)
	if err != nil {
		return nil, err
	}
	return &queryBinder[P]{params: params}, nil
}

// queryParamsOf is newQueryBinder's reading of the contract for the
// struct type t.
func queryParamsOf(doc *openapi3.T, t reflect.Type, method, path string, inPath ...string) ([]queryParam, error) {
	item := doc.Paths.Value(path)
	if item == nil || item.GetOperation(method) == nil {
		return nil, fmt.Errorf("the contract has no %s %s", method, path)
	}
	fields := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("form"), ",")
		if name == "" {
			return nil, fmt.Errorf("%s's field %s names no query parameter", t, t.Field(i).Name)
		}
		fields[name] = i
	}
	var params []queryParam
	for _, ref := range append(item.Parameters, item.GetOperation(method).Parameters...) {
		p := ref.Value
		if p.In == openapi3.ParameterInPath && slices.Contains(inPath, p.Name) {
			continue
		}
		if p.In != openapi3.ParameterInQuery {
			return nil, fmt.Errorf("%s %s takes %s in the %s", method, path, p.Name, p.In)
		}
		i, ok := fields[p.Name]
		if !ok {
			return nil, fmt.Errorf("%s has no field for the query parameter %s", t, p.Name)
		}
		delete(fields, p.Name)
		params = append(params, newQueryParam(p, i, t.Field(i).Type))
	}
	for name := range fields {
		return nil, fmt.Errorf("%s's field for %s is no query parameter of %s %s", t, name, method, path)
	}
	return params, nil
}

// newQueryParam is p as the generated wrapper binds it into a field of
// type ft: style form and exploded unless the contract says otherwise,
// its schema's type and format.
func newQueryParam(p *openapi3.Parameter, field int, ft reflect.Type) queryParam {
	q := queryParam{name: p.Name, style: p.Style, explode: true, required: p.Required, field: field}
	if q.style == "" {
		q.style = openapi3.SerializationForm
	}
	if ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	// An exploded object's fields are query keys of their own: only a
	// value bound from its own key can be known absent by that key.
	q.absentIsNil = !q.required && q.style == openapi3.SerializationForm && ft.Kind() != reflect.Struct && ft.Kind() != reflect.Map
	if p.Explode != nil {
		q.explode = *p.Explode
	}
	if s := p.Schema; s != nil && s.Value != nil {
		if s.Value.Type != nil && len(s.Value.Type.Slice()) == 1 {
			q.opts.Type = s.Value.Type.Slice()[0]
		}
		q.opts.Format = s.Value.Format
	}
	return q
}

// bind is the parameters of a request whose query is query: the first
// that fails is the generated wrapper's error for it
// (api.RequiredParamError or api.InvalidParamFormatError).
func (b *queryBinder[P]) bind(query url.Values) (P, error) {
	var params P
	v := reflect.ValueOf(&params).Elem()
	for _, p := range b.params {
		if _, present := query[p.name]; !present && p.absentIsNil {
			continue
		}
		err := runtime.BindQueryParameterWithOptions(p.style, p.explode, p.required, p.name, query, v.Field(p.field).Addr().Interface(), p.opts)
		if err == nil {
			continue
		}
		if required := (*runtime.RequiredParameterError)(nil); errors.As(err, &required) {
			return params, &api.RequiredParamError{ParamName: p.name}
		}
		return params, &api.InvalidParamFormatError{ParamName: p.name, Err: err}
	}
	return params, nil
}

// boundRoutes is the generated router's mux, with the list routes and
// the download served by handlers that bind their query from one parse:
// HandleFunc registers those in place of the generated wrapper's methods.
type boundRoutes struct {
	*http.ServeMux
	own map[string]http.HandlerFunc
	// replaced counts the patterns registered with a handler of own.
	replaced int
}

// newBoundRoutes builds the list routes' handlers over si, with the
// wrapper's middlewares and error handler, for the generated router to
// register on mux. An error means the contract and the generated structs
// disagree: New serves the generated wrappers then.
func newBoundRoutes(mux *http.ServeMux, si api.ServerInterface, opts api.StdHTTPServerOptions) (*boundRoutes, error) {
	doc, err := api.GetSpec()
	if err != nil {
		return nil, err
	}
	list, err := newQueryBinder[api.ListFilesParams](doc, http.MethodGet, "/uploaded-file")
	if err != nil {
		return nil, err
	}
	hostList, err := newQueryBinder[api.HostListFilesParams](doc, http.MethodGet, "/internal/uploaded-file")
	if err != nil {
		return nil, err
	}
	download, err := newQueryBinder[api.DownloadFileParams](doc, http.MethodGet, "/uploaded-file/{id}/download", "id")
	if err != nil {
		return nil, err
	}
	w := api.ServerInterfaceWrapper{Handler: si, HandlerMiddlewares: opts.Middlewares, ErrorHandlerFunc: opts.ErrorHandlerFunc}
	return &boundRoutes{ServeMux: mux, own: map[string]http.HandlerFunc{
		http.MethodGet + " " + opts.BaseURL + "/uploaded-file": boundRoute(w, list, func(w http.ResponseWriter, r *http.Request, p api.ListFilesParams) {
			si.ListFiles(w, r, p)
		}),
		http.MethodGet + " " + opts.BaseURL + "/internal/uploaded-file": boundRoute(w, hostList, func(w http.ResponseWriter, r *http.Request, p api.HostListFilesParams) {
			si.HostListFiles(w, r, p)
		}),
		//lint:ignore SA1019 the compatibility download route is still served, so it binds like the others
		http.MethodGet + " " + opts.BaseURL + "/uploaded-file/{id}/download": boundFileRoute(w, download, si.DownloadFile),
	}}, nil
}

// HandleFunc implements api.ServeMux.
func (m *boundRoutes) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	if own, ok := m.own[pattern]; ok {
		h = own
		m.replaced++
	}
	m.ServeMux.HandleFunc(pattern, h)
}

// boundRoute is what the generated wrapper of an operation does, with its
// parameters bound by b: a refused parameter goes to the wrapper's error
// handler, and the operation runs inside the wrapper's middlewares.
func boundRoute[P any](w api.ServerInterfaceWrapper, b *queryBinder[P], op func(http.ResponseWriter, *http.Request, P)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		params, err := b.bind(r.URL.Query())
		if err != nil {
			w.ErrorHandlerFunc(rw, r, err)
			return
		}
		serveBound(w, rw, r, func(rw http.ResponseWriter, r *http.Request) { op(rw, r, params) })
	}
}

// boundFileRoute is boundRoute for an operation on one file: the path's
// id is bound first, by the runtime function and options the generated
// wrapper uses, then the query.
func boundFileRoute[P any](w api.ServerInterfaceWrapper, b *queryBinder[P], op func(http.ResponseWriter, *http.Request, api.FileID, P)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		var id api.FileID
		err := runtime.BindStyledParameterWithOptions("simple", "id", r.PathValue("id"), &id, runtime.BindStyledParameterOptions{
			ParamLocation: runtime.ParamLocationPath, Required: true, Type: "string", Format: "uuid", ValueIsUnescaped: true,
		})
		if err != nil {
			w.ErrorHandlerFunc(rw, r, &api.InvalidParamFormatError{ParamName: "id", Err: err})
			return
		}
		params, err := b.bind(r.URL.Query())
		if err != nil {
			w.ErrorHandlerFunc(rw, r, err)
			return
		}
		serveBound(w, rw, r, func(rw http.ResponseWriter, r *http.Request) { op(rw, r, id, params) })
	}
}

// serveBound runs op inside the wrapper's middlewares, as the generated
// wrapper does once the parameters are bound.
func serveBound(w api.ServerInterfaceWrapper, rw http.ResponseWriter, r *http.Request, op http.HandlerFunc) {
	var h http.Handler = op
	for _, m := range w.HandlerMiddlewares {
		h = m(h)
	}
	h.ServeHTTP(rw, r)
}
