// Package floor holds the handlers of the bench's floors that more than
// one measurement runs: the raw baseline's lookup and download (bench) and
// the in-process download floor (internal/adapter/httpapi's benchmarks), so both
// measure the same code.
package floor

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/servecontent"
)

// BareSelect is the bare SELECT by key every lookup floor runs.
const BareSelect = "SELECT key FROM uploaded_file WHERE key = $1"

// key runs BareSelect for the request's key query parameter; false: a 404
// was sent.
func key(pool *pgxpool.Pool, w http.ResponseWriter, r *http.Request) (string, bool) {
	var k string
	if err := pool.QueryRow(r.Context(), BareSelect, r.URL.Query().Get("key")).Scan(&k); err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return "", false
	}
	return k, true
}

// Lookup is the floor of any HTTP lookup: BareSelect behind a minimal
// handler, no token, the key as JSON.
func Lookup(pool *pgxpool.Pool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if k, ok := key(pool, w, r); ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"key":%q}`, k)
		}
	}
}

// Download is the floor of a download that checks the database first:
// BareSelect, then the file under files opened by path, fstat and
// http.ServeContent, as http.FileServer serves it.
func Download(pool *pgxpool.Pool, files string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, ok := key(pool, w, r)
		if !ok {
			return
		}
		f, modTime, ok := open(w, files, k)
		if !ok {
			return
		}
		defer func() { _ = f.Close() }()
		http.ServeContent(w, r, path.Base(k), modTime, f)
	}
}

// open opens the file of key under files by path and reads its
// modification time (fstat); false: an error was sent.
func open(w http.ResponseWriter, files, key string) (*os.File, time.Time, bool) {
	f, err := os.Open(filepath.Join(files, filepath.FromSlash(key)))
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return nil, time.Time{}, false
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		http.Error(w, "stat", http.StatusInternalServerError)
		return nil, time.Time{}, false
	}
	return f, fi.ModTime(), true
}

// sameWorkSelect reads what the detail lookup reads: the columns of its
// answer, by id within the tenant, visible rows only.
const sameWorkSelect = `SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status,
    is_temporary, disposition, checksum, coalesce(etag, ''), width, height, extra_data, module, entity, entity_id, type,
    created_at, completed_at, expired_at
FROM uploaded_file
WHERE id = $1 AND tenant_code = $2 AND status = 'ready'
    AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL`

// sameWorkFile is the detail's JSON, field for field.
type sameWorkFile struct {
	ID           string          `json:"id"`
	Key          string          `json:"key"`
	CDN          *string         `json:"cdn"`
	OriginalName string          `json:"originalName"`
	SizeBytes    int64           `json:"sizeBytes"`
	ContentType  string          `json:"contentType"`
	Visibility   string          `json:"visibility"`
	Status       string          `json:"status"`
	IsTemporary  bool            `json:"isTemporary"`
	Disposition  string          `json:"disposition"`
	Checksum     *string         `json:"checksum"`
	Width        *int32          `json:"width"`
	Height       *int32          `json:"height"`
	ExtraData    json.RawMessage `json:"extraData"`
	Module       *string         `json:"module"`
	Entity       *string         `json:"entity"`
	EntityID     *string         `json:"entityId"`
	Type         *string         `json:"type"`
	CreatedAt    time.Time       `json:"createdAt"`
	CompletedAt  *time.Time      `json:"completedAt"`
	ExpiredAt    *time.Time      `json:"expiredAt"`
	URL          string          `json:"url"`
	URLExpiredAt time.Time       `json:"urlExpiredAt"`
}

// verifiedTokens is the same-work floors' cache of verified tokens: a
// bearer token's caller (tenant and user) by the token's SHA-256, as the
// server's guard keeps a reused token's claims. The first sight of a token
// trusts its payload, where the server verifies it once.
type verifiedTokens struct {
	m sync.Map // [32]byte -> caller
}

// caller is who a token names; tenantWide when its roles hold "admin"
// (the bench's list server decides the tenant's list for them).
type caller struct {
	tenant, user string
	tenantWide   bool
}

// tenant is the tenant of r's bearer token; false: a 401 was sent.
func (t *verifiedTokens) tenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	c, ok := t.caller(w, r)
	return c.tenant, ok
}

// caller is the caller of r's bearer token; false: a 401 was sent.
func (t *verifiedTokens) caller(w http.ResponseWriter, r *http.Request) (caller, bool) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(token))
	if c, ok := t.m.Load(sum); ok {
		return c.(caller), true
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return caller{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Tenant string   `json:"tenant"`
		Sub    string   `json:"sub"`
		Roles  []string `json:"roles"`
	}
	if err != nil || json.Unmarshal(payload, &claims) != nil || claims.Tenant == "" || claims.Sub == "" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return caller{}, false
	}
	c, _ := t.m.LoadOrStore(sum, caller{tenant: claims.Tenant, user: claims.Sub, tenantWide: slices.Contains(claims.Roles, "admin")})
	return c.(caller), true
}

// SameWorkLookup is the floor of the detail lookup doing the same work
// with none of the service around it: the bearer token looked up in a
// cache of verified tokens by its SHA-256 (as a reused token is; the first
// sight of a token trusts its payload, where the server verifies it once),
// the detail's columns read by id within the token's tenant, a download
// URL signed with HMAC-SHA256 over the key, the object's version and the
// expiry, and the same JSON encoded. What the detail
// lookup costs beyond it is the service's own code: guard, middleware,
// scope, error classification, the generated server.
func SameWorkLookup(pool *pgxpool.Pool, secret []byte) http.HandlerFunc {
	var tokens verifiedTokens
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := tokens.tenant(w, r)
		if !ok {
			return
		}
		var f sameWorkFile
		var id uuid.UUID
		var etag string
		err := pool.QueryRow(r.Context(), sameWorkSelect, r.PathValue("id"), tenant).Scan(&id, &f.Key, &f.CDN, &f.OriginalName,
			&f.SizeBytes, &f.ContentType, &f.Visibility, &f.Status, &f.IsTemporary, &f.Disposition, &f.Checksum, &etag, &f.Width, &f.Height,
			&f.ExtraData, &f.Module, &f.Entity, &f.EntityID, &f.Type, &f.CreatedAt, &f.CompletedAt, &f.ExpiredAt)
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		f.ID = id.String()
		f.URLExpiredAt = time.Now().Add(15 * time.Minute).UTC()
		mac := hmac.New(sha256.New, secret)
		_, _ = fmt.Fprintf(mac, "%s\n%s\n%d", f.Key, etag, f.URLExpiredAt.Unix())
		f.URL = "/_storage/" + f.Key + "?expires=" + strconv.FormatInt(f.URLExpiredAt.Unix(), 10) + "&signature=" + hex.EncodeToString(mac.Sum(nil))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(f)
	}
}

// sameWorkDownloadSelect reads what /download reads: the columns of its
// answer and whether the file has expired, by id within the tenant,
// visible rows only.
const sameWorkDownloadSelect = `SELECT key, original_name, disposition, coalesce(etag, ''),
    (expired_at IS NOT NULL AND expired_at <= now())
FROM uploaded_file
WHERE id = $1 AND tenant_code = $2 AND status = 'ready'
    AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL`

// SameWorkDownload is the floor of /download doing the same work with none
// of the service around it: the bearer token's tenant from a cache of
// verified tokens (as SameWorkLookup), the file's columns read by id within
// that tenant, the file under files opened by path and fstat, the headers
// /download answers with (the type by the name, the sandbox as same-origin,
// the disposition, Cache-Control, the ETag) and http.ServeContent. What
// /download costs beyond it is the service's own code: guard, middleware,
// scope, the storage driver, error classification, the generated server.
func SameWorkDownload(pool *pgxpool.Pool, files string) http.HandlerFunc {
	var tokens verifiedTokens
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := tokens.tenant(w, r)
		if !ok {
			return
		}
		var key, name, disposition, etag string
		var expired bool
		err := pool.QueryRow(r.Context(), sameWorkDownloadSelect, r.PathValue("id"), tenant).Scan(&key, &name, &disposition, &etag, &expired)
		if err != nil || expired {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		f, modTime, ok := open(w, files, key)
		if !ok {
			return
		}
		defer func() { _ = f.Close() }()
		h := w.Header()
		h.Set("Content-Type", cmp.Or(filecheck.ContentTypeOf(name), "application/octet-stream"))
		servecontent.DownloadHeaders(h, filecheck.Disposition(name, disposition == "inline"), etag, false)
		http.ServeContent(w, r, "", modTime, f)
	}
}

// FileServerWithHeaders is http.FileServer over dir answering with the
// headers a granted download sends that the file server does not
// (servecontent.DownloadHeaders: the sandbox, cross-origin as for a signed
// URL, the attachment's Content-Disposition, Cache-Control and an ETag) --
// six of the eleven headers a granted download of the bench's server
// answers with (the file server sends the other five; a server with CORS
// origins configured adds a Vary), each copied, sorted and written by
// net/http. It is the floor of the detail's signed url once its headers
// are paid: the difference is what the grant, the middleware and the
// storage driver add.
func FileServerWithHeaders(dir string) http.Handler {
	files := http.FileServer(http.Dir(dir))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		servecontent.DownloadHeaders(w.Header(), filecheck.AttachmentDisposition(path.Base(r.URL.Path)), floorETag, true)
		files.ServeHTTP(w, r)
	})
}

// floorETag is a quoted ETag of the length the local store's have (an MD5
// in hex): the value is never compared, only sent.
const floorETag = `"00000000000000000000000000000000"`
