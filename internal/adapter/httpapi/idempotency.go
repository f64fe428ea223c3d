package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"hash"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/service"
)

// IdempotencyKeyHeader is the request header of the IETF httpapi draft
// "The Idempotency-Key HTTP Header Field": a client sends one key per
// logical write and the same key on every retry of it.
const IdempotencyKeyHeader = "Idempotency-Key"

// maxIdempotentAnswer bounds a recorded answer (every answer of the
// idempotent routes is a small JSON document or empty).
const maxIdempotentAnswer = 64 << 10

// codeIdempotencyKeyInvalid: the key is empty, longer than 255 bytes, or
// not printable ASCII (400). The service's ErrIdempotencyKeyReused (422)
// and ErrIdempotencyInFlight (409) are the other codes of keyed requests.
const codeIdempotencyKeyInvalid = "core.idempotency.key-invalid"

// idempotentRoute is a write that takes an Idempotency-Key.
type idempotentRoute struct {
	// onFile: the key lives on the row of the file the request creates
	// (service.WithUploadKey): the buffer upload, whose insert claims it
	// at the cost of one index entry.
	onFile bool
	// createsFile: the request creates a file, whose id the key names
	// before anything is written.
	createsFile bool
	// recover answers a retry from the file a dead request with the key
	// was creating (id); ok is false when that file is not the answer (it
	// was never made, or failed): the retry then runs again.
	recover func(ctx context.Context, s *Server, id uuid.UUID) (answer service.IdempotentAnswer, ok bool)
	// recoverRequest answers a retry from what a dead request with the key
	// (first claimed at since) did to what r names; ok is false when it
	// did nothing that is the answer: the retry then runs again.
	recoverRequest func(ctx context.Context, s *Server, r *http.Request, since time.Time) (answer service.IdempotentAnswer, ok bool)
}

// idempotentRoutes are the writes a retry could otherwise repeat: uploads,
// initiates and clones (a second file, counted twice), complete, delete
// (which also aborts a pending upload), and the host's batch routes --
// exactly the operations of api/openapi.yaml that declare the
// Idempotency-Key header (TestIdempotentRoutesAreTheContracts).
var idempotentRoutes = map[string]idempotentRoute{
	"POST /uploaded-file":                       {onFile: true},
	"POST /uploaded-file/initiate":              {createsFile: true, recover: recoverInitiate},
	"POST /uploaded-file/temporary/initiate":    {createsFile: true, recover: recoverInitiate},
	"POST /uploaded-file/{id}/complete":         {},
	"DELETE /uploaded-file/{id}":                {recoverRequest: recoverDelete},
	"POST /internal/uploaded-file/initiate":     {createsFile: true, recover: recoverInitiate},
	"POST /internal/uploaded-file/uploads":      {createsFile: true, recover: recoverHostUpload},
	"POST /internal/uploaded-file/clone":        {createsFile: true, recover: recoverHostUpload},
	"POST /internal/uploaded-file/mark-used":    {},
	"POST /internal/uploaded-file/use-files":    {},
	"POST /internal/uploaded-file/change-files": {},
	"POST /internal/uploaded-file/delete":       {},
}

// idempotent runs a write that carries an Idempotency-Key at most once per
// key, caller and 24 hours (the generated router's per-operation
// middleware: r.Pattern names the route). The first request with a key
// runs and its answer is recorded, unless it is a 5xx (the key is then
// given back: the retry runs again); a retry with the same request gets
// the recorded answer; one with another request (route, path, content
// type, body) is 422; one while the first still runs is 409 with
// Retry-After. A request that creates a file names the file's id under the
// key before it writes, so a retry after a crash answers from that file
// instead of making a second one.
func (s *Server) idempotent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys, sent := r.Header[IdempotencyKeyHeader]
		route, ok := idempotentRoutes[r.Pattern]
		if !sent || !ok {
			next.ServeHTTP(w, r)
			return
		}
		// A key that is sent empty, or more than once, is refused like any
		// malformed key: ignoring it would run a retry as a new request.
		key := keys[0]
		if len(keys) != 1 || !validIdempotencyKey(key) {
			writeProblem(w, r, http.StatusBadRequest, codeIdempotencyKeyInvalid)
			return
		}
		if route.onFile {
			uploadKeyed(w, r, key, next)
			return
		}
		k, err := s.svc.ClaimIdempotencyKey(r.Context(), key, r.Pattern, route.createsFile)
		if err != nil {
			errorWriter{log: s.log}.response(w, r, err)
			return
		}
		switch k.State {
		case service.KeyOnFile:
			writeProblem(w, r, http.StatusUnprocessableEntity, service.ErrIdempotencyKeyReused.Code)
		case service.KeyDone:
			s.replay(w, r, k)
		case service.KeyRunning:
			if k.FileID != nil && route.recover != nil {
				if a, ok := route.recover(r.Context(), s, *k.FileID); ok {
					writeAnswer(w, r.Pattern, a, true) // the running request committed; its answer is on its way
					return
				}
			}
			w.Header().Set("Retry-After", retryAfter(k.RetryAfter))
			writeProblem(w, r, http.StatusConflict, service.ErrIdempotencyInFlight.Code)
		default:
			s.runIdempotent(w, r, k, route, next)
		}
	})
}

// uploadKeyed runs a buffer upload whose key lives on its file's row
// (service.WithUploadKey): the service answers a retry from the first
// file, and the answer says so (Idempotent-Replayed). The fingerprint is
// the service's, of the upload's inputs and the SHA-256 of its bytes, with
// what only the request says (route, path, media type without the
// multipart boundary): a form built again with another boundary is the
// same request, and the body is hashed once, by the upload itself.
func uploadKeyed(w http.ResponseWriter, r *http.Request, key string, next http.Handler) {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";") // the boundary follows
	ct = strings.ToLower(strings.TrimSpace(ct))
	var request []byte
	for _, part := range []string{r.Pattern, r.URL.Path, ct} {
		request = append(request, strconv.Itoa(len(part))+":"+part+"\n"...)
	}
	k := service.NewUploadKey(key, request)
	next.ServeHTTP(&replayMarking{ResponseWriter: w, k: k}, r.WithContext(service.WithUploadKey(r.Context(), k)))
}

// replayMarking marks the answer of a replayed upload (Idempotent-Replayed).
type replayMarking struct {
	http.ResponseWriter
	k *service.UploadKey
}

func (w *replayMarking) WriteHeader(status int) {
	if w.k.Replayed() {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap is the ResponseWriter underneath (http.ResponseController).
func (w *replayMarking) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// validIdempotencyKey: 1 to 255 bytes of printable ASCII (a structured
// field string, as the draft has it, without its quotes).
func validIdempotencyKey(key string) bool {
	if key == "" || len(key) > 255 {
		return false
	}
	for i := range len(key) {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// replay answers a retry of a request whose answer is recorded: the answer
// again when the request is the same, 422 when it is not.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, k *service.IdempotencyKey) {
	fp, err := fingerprintOf(r, k, nil)
	if err != nil {
		return // the body did not arrive: its own error already ended the request
	}
	if k.Route != r.Pattern || !bytes.Equal(fp, k.Answer.Fingerprint) {
		writeProblem(w, r, http.StatusUnprocessableEntity, service.ErrIdempotencyKeyReused.Code)
		return
	}
	writeAnswer(w, k.Route, s.withFreshURL(r.Context(), k.Answer), true)
}

// withoutURLs is answer a as it is recorded: a file answer's download URL
// (a presigned or granted GET, a capability) is never persisted, nor its
// expiry -- withFreshURL resolves a new one for each replay.
func withoutURLs(a service.IdempotentAnswer) service.IdempotentAnswer {
	doc, ok := answerDoc(a)
	if !ok || (doc["url"] == nil && doc["urlExpiredAt"] == nil) {
		return a
	}
	delete(doc, "url")
	delete(doc, "urlExpiredAt")
	return withDoc(a, doc)
}

// withFreshURL is a recorded file answer with the URL it was recorded
// without: resolved again for the caller, as the file's detail would give
// it now. A file that is no longer ready or visible is replayed without.
func (s *Server) withFreshURL(ctx context.Context, a service.IdempotentAnswer) service.IdempotentAnswer {
	doc, ok := answerDoc(a)
	var id, status string
	if !ok || doc["url"] != nil || json.Unmarshal(doc["id"], &id) != nil || json.Unmarshal(doc["status"], &status) != nil ||
		status != string(service.StatusReady) {
		return a
	}
	u, err := s.svc.ResolveURL(ctx, id)
	if err != nil {
		return a
	}
	doc["url"], _ = json.Marshal(u.URL)
	if u.URLExpiredAt != nil {
		doc["urlExpiredAt"], _ = json.Marshal(u.URLExpiredAt)
	}
	return withDoc(a, doc)
}

// answerDoc is a JSON answer's top-level object; false for any other
// answer.
func answerDoc(a service.IdempotentAnswer) (map[string]json.RawMessage, bool) {
	var doc map[string]json.RawMessage
	if !strings.HasPrefix(a.ContentType, "application/json") || json.Unmarshal(a.Body, &doc) != nil || doc == nil {
		return nil, false
	}
	return doc, true
}

// withDoc is a with doc as its body.
func withDoc(a service.IdempotentAnswer, doc map[string]json.RawMessage) service.IdempotentAnswer {
	b, err := json.Marshal(doc)
	if err != nil {
		return a
	}
	a.Body = append(b, '\n')
	return a
}

// runIdempotent runs next holding k: from the file a dead request with the
// key left when that file is the answer, otherwise by running the request,
// with the key's file id and a heartbeat; then records or releases k.
func (s *Server) runIdempotent(w http.ResponseWriter, r *http.Request, k *service.IdempotencyKey, route idempotentRoute, next http.Handler) {
	ctx := r.Context()
	if k.State == service.KeyTakenOver {
		a, ok := service.IdempotentAnswer{}, false
		switch {
		case k.PreviousFileID != nil && route.recover != nil:
			a, ok = route.recover(ctx, s, *k.PreviousFileID)
		case route.recoverRequest != nil:
			a, ok = route.recoverRequest(ctx, s, r, k.FirstClaimed)
		}
		if ok {
			fp, err := fingerprintOf(r, k, nil)
			if err != nil {
				k.Release(context.WithoutCancel(ctx))
				return
			}
			a.Fingerprint = fp
			k.Finish(context.WithoutCancel(ctx), withoutURLs(a))
			writeAnswer(w, r.Pattern, a, true)
			return
		}
	}
	if k.FileID != nil {
		ctx = service.WithNewFileID(ctx, *k.FileID)
	}
	stop := heartbeat(context.WithoutCancel(ctx), k)
	h := newFingerprint(r, k)
	r.Body = &hashingBody{ReadCloser: r.Body, h: h}
	rec := &recordingWriter{ResponseWriter: w}
	next.ServeHTTP(rec, r.WithContext(ctx))
	stop()
	// What the handler left of the body is part of the request too: a
	// retry is compared with all of it.
	_, drainErr := io.Copy(io.Discard, r.Body)
	switch {
	case rec.status >= 500 || rec.status == 0 || rec.overflow || drainErr != nil:
		k.Release(context.WithoutCancel(ctx))
	default:
		k.Finish(context.WithoutCancel(ctx), withoutURLs(service.IdempotentAnswer{
			Fingerprint: h.Sum(nil), Status: rec.status, ContentType: rec.Header().Get("Content-Type"), Body: rec.body.Bytes(),
		}))
	}
}

// heartbeat extends k's claim every third of its lease until the returned
// function is called (or the claim is lost).
func heartbeat(ctx context.Context, k *service.IdempotencyKey) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(service.IdempotencyLease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if !k.Heartbeat(ctx) {
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// writeAnswer writes a recorded answer of route (replayed: it was not made
// by this request); a 201 carries the created file's Location again.
func writeAnswer(w http.ResponseWriter, route string, a service.IdempotentAnswer, replayed bool) {
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	if l := locationOfAnswer(route, a.Body); a.Status == http.StatusCreated && l != nil {
		w.Header().Set("Location", *l)
	}
	w.Header().Set("Cache-Control", "no-store")
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// newFingerprint starts the fingerprint of r: its route, its path (the
// file it names), its content type without a multipart boundary; the body
// follows as it is read.
func newFingerprint(r *http.Request, k *service.IdempotencyKey) hash.Hash {
	h := sha256.New()
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	parts := []string{r.Pattern, r.URL.Path, ct}
	if k.Department != "" {
		// The caller's department is part of the request: a key first
		// sent under one department and again under another is another
		// request (422), never a replay of an answer its detail would
		// refuse. Callers without one keep the fingerprints they had.
		parts = append(parts, "department:"+k.Department)
	}
	hashParts(h, parts...)
	if b := params["boundary"]; b != "" {
		// A client builds the form again for a retry, with a boundary of
		// its own: the fingerprint is the form's content, without it.
		return &unbounded{Hash: h, boundary: []byte(b)}
	}
	return h
}

// hashParts writes each part to h with its length before it, so that no
// two lists of parts hash alike.
func hashParts(h hash.Hash, parts ...string) {
	for _, part := range parts {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part + "\n"))
	}
}

// fingerprintOf reads what is left of r's body into the fingerprint begun
// by newFingerprint (or h, when given) and returns it.
func fingerprintOf(r *http.Request, k *service.IdempotencyKey, h hash.Hash) ([]byte, error) {
	if h == nil {
		h = newFingerprint(r, k)
	}
	if _, err := io.Copy(h, r.Body); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// unbounded hashes what is written with every occurrence of a multipart
// boundary left out (an occurrence may straddle two writes: the last
// len(boundary)-1 bytes are held back until the next write or Sum).
type unbounded struct {
	hash.Hash
	boundary []byte
	held     []byte
}

func (u *unbounded) Write(p []byte) (int, error) {
	buf := append(u.held, p...)
	for {
		i := bytes.Index(buf, u.boundary)
		if i < 0 {
			break
		}
		u.Hash.Write(buf[:i])
		buf = buf[i+len(u.boundary):]
	}
	keep := min(len(buf), len(u.boundary)-1)
	u.Hash.Write(buf[:len(buf)-keep])
	u.held = append(u.held[:0], buf[len(buf)-keep:]...)
	return len(p), nil
}

func (u *unbounded) Sum(b []byte) []byte {
	u.Hash.Write(u.held)
	u.held = u.held[:0]
	return u.Hash.Sum(b)
}

// hashingBody feeds what is read of a body to a fingerprint.
type hashingBody struct {
	io.ReadCloser
	h hash.Hash
}

func (b *hashingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.h.Write(p[:n])
	return n, err
}

// recordingWriter writes through to the client and keeps the status and
// (up to maxIdempotentAnswer) the body, to record them.
type recordingWriter struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	overflow bool
}

func (w *recordingWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len()+len(p) > maxIdempotentAnswer {
		w.overflow = true
	} else {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverHostUpload answers a host upload or clone again from the file a
// dead request made: ready and visible, it is the answer (201, the host's
// view). The end user's upload keeps its key on its file instead
// (uploadKeyed).
func recoverHostUpload(ctx context.Context, s *Server, id uuid.UUID) (service.IdempotentAnswer, bool) {
	r, err := s.svc.Find(ctx, id.String())
	if err != nil || r.Status != service.StatusReady {
		return service.IdempotentAnswer{}, false
	}
	return jsonAnswer(http.StatusCreated, hostFile(r))
}

// recoverInitiate answers an initiate again from the pending upload a dead
// request made: its id and a target until its own expiry (201).
func recoverInitiate(ctx context.Context, s *Server, id uuid.UUID) (service.IdempotentAnswer, bool) {
	r, err := s.svc.ResumeUpload(ctx, id.String())
	if err != nil {
		return service.IdempotentAnswer{}, false
	}
	return jsonAnswer(http.StatusCreated, initiateResult(r))
}

func jsonAnswer(status int, v any) (service.IdempotentAnswer, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return service.IdempotentAnswer{}, false
	}
	return service.IdempotentAnswer{Status: status, ContentType: "application/json", Body: append(b, '\n')}, true
}

// recoverDelete answers a delete again when the file it names was deleted
// after the key was first claimed -- by the dead request, or by another
// at the same time: either way the delete's answer is 204. Anything else
// (missing, out of scope, deleted before) runs the delete again.
func recoverDelete(ctx context.Context, s *Server, r *http.Request, since time.Time) (service.IdempotentAnswer, bool) {
	deleted, err := s.svc.DeletedSince(ctx, r.PathValue("id"), since)
	if err != nil || !deleted {
		return service.IdempotentAnswer{}, false
	}
	return service.IdempotentAnswer{Status: http.StatusNoContent}, true
}
