package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	api "github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/service"
)

// jsonBodies names the schema of every JSON request body, by route: what
// api/openapi.yaml declares with additionalProperties: false (the extra
// data patch is a free-form object).
var jsonBodies = map[string]func() any{
	"POST /uploaded-file/initiate":                  func() any { return new(api.InitiateUploadJSONRequestBody) },
	"POST /uploaded-file/temporary/initiate":        func() any { return new(api.InitiateTemporaryUploadJSONRequestBody) },
	"POST /internal/uploaded-file/initiate":         func() any { return new(api.HostInitiateUploadJSONRequestBody) },
	"POST /internal/uploaded-file/clone":            func() any { return new(api.HostCloneFromUrlJSONRequestBody) },
	"PATCH /internal/uploaded-file/{id}/extra-data": func() any { return new(map[string]any) },
	"POST /internal/uploaded-file/mark-used":        func() any { return new(api.HostMarkUsedJSONRequestBody) },
	"POST /internal/uploaded-file/use-files":        func() any { return new(api.HostUseFilesJSONRequestBody) },
	"POST /internal/uploaded-file/change-files":     func() any { return new(api.HostChangeFilesJSONRequestBody) },
	"POST /internal/uploaded-file/delete":           func() any { return new(api.HostDeleteJSONRequestBody) },
}

// strictJSON enforces the contract's closed JSON bodies before a handler
// runs: a member the schema does not list, or anything after the one JSON
// value, is core.file.invalid-meta (400) and nothing happens. (The
// generated decoder ignores both.) The body, already bounded by
// limitBodies, is read once here and handed on unchanged.
func strictJSON(next http.Handler) http.Handler {
	routes := http.NewServeMux()
	for pattern := range jsonBodies {
		routes.Handle(pattern, http.NotFoundHandler())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPatch {
			next.ServeHTTP(w, r) // no JSON body in the contract (and no second route lookup on every download)
			return
		}
		_, pattern := routes.Handler(r)
		newBody, ok := jsonBodies[pattern]
		if !ok || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeProblem(w, r, http.StatusRequestEntityTooLarge, service.ErrInvalidMeta.Code)
				return
			}
			writeProblem(w, r, http.StatusBadRequest, service.ErrInvalidMeta.Code)
			return
		}
		if !closedJSON(raw, newBody()) {
			writeProblem(w, r, http.StatusBadRequest, service.ErrInvalidMeta.Code)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		next.ServeHTTP(w, r)
	})
}

// closedJSON reports whether raw is exactly one JSON value that decodes
// into v with no member v does not have.
func closedJSON(raw []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false
	}
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}
