package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/service"
)

// tusIdempotent runs a creation that carries an Idempotency-Key at most
// once per key and caller, as the API's writes do: the upload's id is named
// under the key before it is created, so a retry whose answer was lost --
// or whose server died -- is answered with the same upload (201, its URL,
// Idempotent-Replayed: true), never a second one holding quota. A key used
// for another request (route, length, metadata, department) is 422; one
// whose first request still runs, 409 with Retry-After. Other requests
// pass through.
// The key is claimed on the route "POST " + base.
func (s *Server) tusIdempotent(base string, tus http.Handler) http.Handler {
	route := "POST " + base
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys, sent := r.Header[IdempotencyKeyHeader]
		if !sent || r.Method != http.MethodPost {
			tus.ServeHTTP(w, r)
			return
		}
		if len(keys) != 1 || !validIdempotencyKey(keys[0]) {
			writeProblem(w, r, http.StatusBadRequest, codeIdempotencyKeyInvalid)
			return
		}
		k, err := s.svc.ClaimIdempotencyKey(r.Context(), keys[0], route, true)
		if err != nil {
			errorWriter{log: s.log}.response(w, r, err)
			return
		}
		fp := tusFingerprint(r, route, k)
		switch k.State {
		case service.KeyOnFile:
			writeProblem(w, r, http.StatusUnprocessableEntity, service.ErrIdempotencyKeyReused.Code)
		case service.KeyDone:
			s.tusReplay(w, r, base, k, fp)
		case service.KeyRunning:
			if k.FileID != nil && s.tusCreated(w, r, base, *k.FileID) {
				return
			}
			w.Header().Set("Retry-After", retryAfter(k.RetryAfter))
			writeProblem(w, r, http.StatusConflict, service.ErrIdempotencyInFlight.Code)
		default:
			if k.State == service.KeyTakenOver && k.PreviousFileID != nil && s.tusCreated(w, r, base, *k.PreviousFileID) {
				k.Finish(context.WithoutCancel(r.Context()), tusAnswer(fp, *k.PreviousFileID))
				return
			}
			s.tusCreate(w, r, k, fp, tus)
		}
	})
}

// tusCreate creates the upload under k's file id and records the answer:
// a 201 as the upload's id, a refusal as it was sent; a 5xx gives the key
// back (the retry runs again).
func (s *Server) tusCreate(w http.ResponseWriter, r *http.Request, k *service.IdempotencyKey, fp []byte, tus http.Handler) {
	ctx := r.Context()
	if k.FileID != nil {
		ctx = service.WithNewFileID(ctx, *k.FileID)
	}
	stop := heartbeat(context.WithoutCancel(ctx), k)
	rec := &recordingWriter{ResponseWriter: w}
	tus.ServeHTTP(rec, r.WithContext(ctx))
	stop()
	switch {
	case rec.status >= 500 || rec.status == 0 || rec.overflow:
		k.Release(context.WithoutCancel(ctx))
	case rec.status == http.StatusCreated && k.FileID != nil:
		k.Finish(context.WithoutCancel(ctx), tusAnswer(fp, *k.FileID))
	default:
		k.Finish(context.WithoutCancel(ctx), service.IdempotentAnswer{Fingerprint: fp, Status: rec.status, ContentType: rec.Header().Get("Content-Type"), Body: rec.body.Bytes()})
	}
}

// tusAnswer is the recorded answer of a creation: the upload's id (its
// URL and offset are read again for every replay).
func tusAnswer(fp []byte, id uuid.UUID) service.IdempotentAnswer {
	b, _ := json.Marshal(map[string]string{"id": id.String()})
	return service.IdempotentAnswer{Fingerprint: fp, Status: http.StatusCreated, ContentType: "application/json", Body: b}
}

// tusReplay answers a retry of a creation whose answer is recorded.
func (s *Server) tusReplay(w http.ResponseWriter, r *http.Request, base string, k *service.IdempotencyKey, fp []byte) {
	route := "POST " + base
	if k.Route != route || !bytes.Equal(fp, k.Answer.Fingerprint) {
		writeProblem(w, r, http.StatusUnprocessableEntity, service.ErrIdempotencyKeyReused.Code)
		return
	}
	var created struct{ ID uuid.UUID }
	if k.Answer.Status == http.StatusCreated && json.Unmarshal(k.Answer.Body, &created) == nil {
		if !s.tusCreated(w, r, base, created.ID) {
			writeProblem(w, r, http.StatusNotFound, service.ErrNotFound.Code) // finished and deleted, aborted or expired since
		}
		return
	}
	writeAnswer(w, route, k.Answer, true)
}

// tusCreated answers 201 with the upload id's URL below base and its
// offset, when it is the caller's resumable upload; false when it is not
// (never made, or gone).
func (s *Server) tusCreated(w http.ResponseWriter, r *http.Request, base string, id uuid.UUID) bool {
	up, err := s.svc.ResumableState(r.Context(), id.String())
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	h := w.Header()
	h.Set("Location", scheme+"://"+r.Host+base+id.String())
	h.Set("Tus-Resumable", "1.0.0")
	h.Set("Upload-Offset", strconv.FormatInt(up.Offset, 10))
	h.Set("Upload-Expires", up.ExpiresAt.UTC().Format(http.TimeFormat))
	h.Set("Idempotent-Replayed", "true")
	w.WriteHeader(http.StatusCreated)
	return true
}

// tusFingerprint is what makes two creations the same request: the
// route, the declared length and metadata, the caller's department.
func tusFingerprint(r *http.Request, route string, k *service.IdempotencyKey) []byte {
	h := sha256.New()
	hashParts(h, route, r.Header.Get("Upload-Length"), r.Header.Get("Upload-Defer-Length"), r.Header.Get("Upload-Metadata"), "department:"+k.Department)
	return h.Sum(nil)
}
