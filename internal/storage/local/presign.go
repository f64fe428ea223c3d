package local

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/internal/servecontent"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// ChecksumHeader carries the base64 SHA-256 a presigned PUT declared.
const ChecksumHeader = "X-Checksum-Sha256"

// Query parameters of a presigned URL. Every one of them is covered by sig.
const (
	qKey         = "key"
	qMethod      = "method"
	qExpires     = "expires"
	qLength      = "length"
	qType        = "type"
	qChecksum    = "sha256"
	qDisposition = "response-content-disposition"
	qRespType    = "response-content-type"
	qSignature   = "sig"
)

// signedFields is the canonical order of the signed parameters.
var signedFields = []string{qMethod, qKey, qExpires, qLength, qType, qChecksum, qDisposition, qRespType}

// PresignPut implements storage.Store.
func (s *Store) PresignPut(_ context.Context, key string, opts storage.PresignPutOptions) (storage.Presigned, error) {
	if err := s.presignable(key, opts.Expires); err != nil {
		return storage.Presigned{}, err
	}
	if opts.Size < 0 {
		return storage.Presigned{}, errors.New("local storage: negative size")
	}
	exp := time.Now().Add(opts.Expires).Truncate(time.Second)
	q := url.Values{
		qMethod: {http.MethodPut}, qKey: {key}, qExpires: {strconv.FormatInt(exp.Unix(), 10)},
		qLength: {strconv.FormatInt(opts.Size, 10)}, qType: {opts.ContentType},
	}
	h := http.Header{
		"Content-Type":   {opts.ContentType},
		"Content-Length": {strconv.FormatInt(opts.Size, 10)},
		"If-None-Match":  {"*"}, // as on S3: the target is written once
	}
	if opts.SHA256 != nil {
		b64 := base64.StdEncoding.EncodeToString(opts.SHA256)
		q.Set(qChecksum, b64)
		h.Set(ChecksumHeader, b64)
	}
	return storage.Presigned{Method: http.MethodPut, URL: s.signedURL(q), Header: h, ExpiresAt: exp}, nil
}

// PresignGet implements storage.Store.
func (s *Store) PresignGet(_ context.Context, key string, opts storage.PresignGetOptions) (storage.Presigned, error) {
	if err := s.presignable(key, opts.Expires); err != nil {
		return storage.Presigned{}, err
	}
	exp := time.Now().Add(opts.Expires).Truncate(time.Second)
	q := url.Values{qMethod: {http.MethodGet}, qKey: {key}, qExpires: {strconv.FormatInt(exp.Unix(), 10)}}
	if opts.ContentDisposition != "" {
		q.Set(qDisposition, opts.ContentDisposition)
	}
	if opts.ContentType != "" {
		q.Set(qRespType, opts.ContentType)
	}
	return storage.Presigned{Method: http.MethodGet, URL: s.signedURL(q), Header: http.Header{}, ExpiresAt: exp}, nil
}

func (s *Store) presignable(key string, lifetime time.Duration) error {
	if s.cfg.PresignBaseURL == "" {
		return storage.ErrUnsupported
	}
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	return storage.CheckLifetime(lifetime)
}

// signedURL puts the key in the path (so the URL names its object) and the
// signature over every field, the key included, in the query.
func (s *Store) signedURL(q url.Values) string {
	q.Set(qSignature, s.sign(q))
	key := q.Get(qKey)
	q.Del(qKey)
	return s.cfg.PresignBaseURL + "/" + escapePath(key) + "?" + q.Encode()
}

func escapePath(key string) string {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return strings.Join(segs, "/")
}

func (s *Store) sign(q url.Values) string {
	mac := hmac.New(sha256.New, s.cfg.PresignSecret)
	for _, f := range signedFields {
		// Length-prefixed, so no two sets of values share a canonical form.
		v := q.Get(f)
		mac.Write([]byte(strconv.Itoa(len(v)) + ":" + v + "\n"))
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Handler serves presigned requests; mount it at Config.PresignBaseURL
// (with the base path stripped, e.g. http.StripPrefix).
// A bad or expired signature is 403, a missing object 404, a PUT whose
// length, type or checksum differs from the signed ones 400, a PUT to an
// existing object 409. GET supports Range and conditional requests.
func (s *Store) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		q.Set(qKey, strings.TrimPrefix(r.URL.Path, "/"))
		if !s.verify(q, r.Method) {
			http.Error(w, "signature invalid or expired", http.StatusForbidden)
			return
		}
		switch r.Method {
		case http.MethodPut:
			s.servePut(w, r, q)
		case http.MethodGet, http.MethodHead:
			s.serveGet(w, r, q)
		}
	})
}

func (s *Store) verify(q url.Values, method string) bool {
	want := s.sign(q)
	got := q.Get(qSignature)
	if !hmac.Equal([]byte(want), []byte(got)) {
		return false
	}
	signed := q.Get(qMethod)
	if method != signed && (method != http.MethodHead || signed != http.MethodGet) {
		return false
	}
	exp, err := strconv.ParseInt(q.Get(qExpires), 10, 64)
	return err == nil && time.Now().Before(time.Unix(exp, 0))
}

func (s *Store) servePut(w http.ResponseWriter, r *http.Request, q url.Values) {
	size, _ := strconv.ParseInt(q.Get(qLength), 10, 64)
	if r.ContentLength != size || r.Header.Get("Content-Type") != q.Get(qType) ||
		r.Header.Get(ChecksumHeader) != q.Get(qChecksum) || r.Header.Get("If-None-Match") != "*" {
		http.Error(w, "length, content type or checksum differ from the signed request", http.StatusBadRequest)
		return
	}
	var sum []byte
	if c := q.Get(qChecksum); c != "" {
		var err error
		if sum, err = base64.StdEncoding.DecodeString(c); err != nil {
			http.Error(w, "bad checksum", http.StatusBadRequest)
			return
		}
	}
	oi, err := s.Put(r.Context(), q.Get(qKey), r.Body, storage.PutOptions{ContentType: q.Get(qType), Size: size, SHA256: sum})
	switch {
	case errors.Is(err, storage.ErrExists):
		http.Error(w, "object exists", http.StatusConflict)
	case errors.Is(err, storage.ErrPrecondition):
		http.Error(w, "bytes do not match the signed length or checksum", http.StatusBadRequest)
	case err != nil:
		http.Error(w, "write failed", http.StatusInternalServerError)
	default:
		w.Header().Set("ETag", oi.ETag)
		w.WriteHeader(http.StatusOK)
	}
}

func (s *Store) serveGet(w http.ResponseWriter, r *http.Request, q url.Values) {
	f, oi, err := s.OpenFile(q.Get(qKey), "")
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	defer func() { _ = f.Close() }()
	ct := q.Get(qRespType)
	if ct == "" {
		b, _ := getxattr(f, xattrContentType)
		ct = string(b)
	}
	w.Header().Set("Content-Type", ct)
	servecontent.SandboxHeaders(w.Header(), true)
	if v := q.Get(qDisposition); v != "" {
		w.Header().Set("Content-Disposition", v)
	}
	w.Header().Set("ETag", oi.ETag)
	if servecontent.CheckRanges(r.Header.Get("Range"), oi.Size) != nil {
		servecontent.RefuseRanges(w, oi.Size)
		return
	}
	http.ServeContent(w, r, "", oi.LastModified, f)
}
