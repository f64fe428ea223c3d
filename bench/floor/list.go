package floor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// listColumns are the columns of a list page's items, and the ETag a
// signed URL covers.
const listColumns = `id, key, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, coalesce(etag, ''), width, height, module, entity, entity_id, type, created_at, completed_at, expired_at`

// listVisible is the list route's visibility: ready rows that no upload or
// deletion holds, temporary ones until they expire.
const listVisible = `status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > now())`

// sameWorkOwnerPage is the owner's page, newest first, after the cursor:
// the owner's list index in its order.
const sameWorkOwnerPage = `SELECT ` + listColumns + `
FROM uploaded_file
WHERE tenant_code = $1 AND user_id = $2 AND ` + listVisible + `
    AND (created_at, id) < ($3, $4)
ORDER BY created_at DESC, id DESC
LIMIT $5`

// sameWorkTenantPage is the tenant's page, newest first, after the
// cursor: the tenant's list index in its order.
const sameWorkTenantPage = `SELECT ` + listColumns + `
FROM uploaded_file
WHERE tenant_code = $1 AND ` + listVisible + `
    AND (created_at, id) < ($2, $3)
ORDER BY created_at DESC, id DESC
LIMIT $4`

// sameWorkRecordPage is the owner's files of one record, newest first,
// after the cursor: the record index.
const sameWorkRecordPage = `SELECT ` + listColumns + `
FROM uploaded_file
WHERE tenant_code = $1 AND entity = $6 AND entity_id = $7 AND user_id = $2 AND ` + listVisible + `
    AND (created_at, id) < ($3, $4)
ORDER BY created_at DESC, id DESC
LIMIT $5`

// sameWorkItem is a list item's JSON, field for field.
type sameWorkItem struct {
	ID           string     `json:"id"`
	OriginalName string     `json:"originalName"`
	SizeBytes    int64      `json:"sizeBytes"`
	ContentType  string     `json:"contentType"`
	Visibility   string     `json:"visibility"`
	Status       string     `json:"status"`
	IsTemporary  bool       `json:"isTemporary"`
	Disposition  string     `json:"disposition"`
	Checksum     *string    `json:"checksum,omitempty"`
	Width        *int32     `json:"width,omitempty"`
	Height       *int32     `json:"height,omitempty"`
	Module       *string    `json:"module,omitempty"`
	Entity       *string    `json:"entity,omitempty"`
	EntityID     *string    `json:"entityId,omitempty"`
	Type         *string    `json:"type,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
	CompletedAt  *time.Time `json:"completedAt,omitempty"`
	ExpiredAt    *time.Time `json:"expiredAt,omitempty"`
	URL          string     `json:"url,omitempty"`
	URLExpiredAt *time.Time `json:"urlExpiredAt,omitempty"`
}

// SameWorkList is the floor of the list route doing the same work with
// none of the service around it: the bearer token's caller from a cache of
// verified tokens (as SameWorkLookup), the cursor opened and its MAC
// checked, one page of the caller's files read within the tenant (a
// record's, given entity and entityId, through its own statement as the
// route's; the tenant's, no record given, for a caller with the admin
// role), a download URL signed per item with HMAC-SHA256 over its key,
// version and expiry, the next page's cursor sealed with HMAC-SHA256, and
// the same JSON. What the list route costs beyond it is the service's own
// code: guard, middleware, scope, filters, the generated server.
func SameWorkList(pool *pgxpool.Pool, secret []byte) http.HandlerFunc {
	var tokens verifiedTokens
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := tokens.caller(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 || limit > 200 {
			limit = 50
		}
		afterCreated, afterID, ok := openListCursor(secret, q.Get("cursor"))
		if !ok {
			http.Error(w, "bad cursor", http.StatusBadRequest)
			return
		}
		statement, args := sameWorkOwnerPage, []any{c.tenant, c.user, afterCreated, afterID, limit + 1}
		switch entity, id := q.Get("entity"), q.Get("entityId"); {
		case entity != "" && id != "":
			statement, args = sameWorkRecordPage, append(args, entity, id)
		case c.tenantWide:
			statement, args = sameWorkTenantPage, []any{c.tenant, afterCreated, afterID, limit + 1}
		}
		rows, err := pool.Query(r.Context(), statement, args...)
		if err != nil {
			http.Error(w, "list", http.StatusInternalServerError)
			return
		}
		page, err := listItems(rows, secret, q.Get("withUrls") == "true")
		if err != nil {
			http.Error(w, "list", http.StatusInternalServerError)
			return
		}
		out := struct {
			Items      []sameWorkItem `json:"items"`
			NextCursor string         `json:"nextCursor,omitempty"`
		}{Items: page}
		if len(page) > limit {
			out.Items = page[:limit]
			last := out.Items[limit-1]
			out.NextCursor = sealListCursor(secret, last.CreatedAt, last.ID)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

// listItems scans a page, each item's URL signed when withURLs.
func listItems(rows pgx.Rows, secret []byte, withURLs bool) ([]sameWorkItem, error) {
	defer rows.Close()
	var page []sameWorkItem
	for rows.Next() {
		var f sameWorkItem
		var id uuid.UUID
		var key, etag string
		if err := rows.Scan(&id, &key, &f.OriginalName, &f.SizeBytes, &f.ContentType, &f.Visibility, &f.Status, &f.IsTemporary,
			&f.Disposition, &f.Checksum, &etag, &f.Width, &f.Height, &f.Module, &f.Entity, &f.EntityID, &f.Type,
			&f.CreatedAt, &f.CompletedAt, &f.ExpiredAt); err != nil {
			return nil, err
		}
		f.ID = id.String()
		if withURLs {
			expires := time.Now().Add(15 * time.Minute).UTC()
			mac := hmac.New(sha256.New, secret)
			_, _ = fmt.Fprintf(mac, "%s\n%s\n%d", key, etag, expires.Unix())
			f.URL = "/_storage/" + key + "?expires=" + strconv.FormatInt(expires.Unix(), 10) + "&signature=" + hex.EncodeToString(mac.Sum(nil))
			f.URLExpiredAt = &expires
		}
		page = append(page, f)
	}
	return page, rows.Err()
}

// sealListCursor is a page's position (its last item's creation time and
// id) as base64 with its MAC.
func sealListCursor(secret []byte, created time.Time, id string) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(created.UTC().Format(time.RFC3339Nano) + " " + id))
	return body + "." + listCursorMAC(secret, body)
}

func listCursorMAC(secret []byte, body string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("list-cursor\n"))
	mac.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openListCursor checks a cursor's MAC and reads its position; no cursor
// is the start of the list.
func openListCursor(secret []byte, c string) (time.Time, uuid.UUID, bool) {
	if c == "" {
		return time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), uuid.Max, true
	}
	body, sig, ok := strings.Cut(c, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(listCursorMAC(secret, body))) {
		return time.Time{}, uuid.Nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return time.Time{}, uuid.Nil, false
	}
	at, id, ok := strings.Cut(string(raw), " ")
	created, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil {
		return time.Time{}, uuid.Nil, false
	}
	parsed, err := uuid.Parse(id)
	return created, parsed, err == nil
}
