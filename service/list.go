package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
)

// OpList is the operation a policy is asked about for a list: owner lists
// the caller's own files, tenant the tenant's (within the department when
// the scope has one), deny refuses (ErrNotFound).
const OpList Operation = "list"

// ListSort orders a list. Each order is fixed; ties are broken by id.
type ListSort string

// The orders.
const (
	// SortCreatedAt: newest first (the default).
	SortCreatedAt ListSort = "createdAt"
	// SortName: by lower-cased name, A to Z (byte order).
	SortName ListSort = "name"
	// SortSize: largest first.
	SortSize ListSort = "size"
)

// Bounds of a page.
const (
	// ListDefaultLimit is a page's size when none is asked for.
	ListDefaultLimit = 50
	// ListMaxLimit is the largest page.
	ListMaxLimit = 200
)

// ListOptions filter, order and page a list; every filter is optional.
type ListOptions struct {
	// Module, Entity and EntityID select the files attached to a record
	// (each compared exactly).
	Module, Entity, EntityID string
	// ContentType is an exact type ("image/png") or a family ("image/*").
	ContentType string
	// Visibility selects public or private files.
	Visibility Visibility
	// Temporary selects temporary (true) or permanent (false) files.
	Temporary *bool
	// CreatedFrom (inclusive) and CreatedBefore (exclusive) bound the
	// creation time.
	CreatedFrom, CreatedBefore *time.Time
	// NamePrefix selects names starting with it, ignoring case; % and _
	// are literal characters.
	NamePrefix string
	// Sort orders the list (default SortCreatedAt).
	Sort ListSort
	// Limit is the page size (default ListDefaultLimit, at most
	// ListMaxLimit).
	Limit int
	// Cursor continues a list from the page that returned it; it is only
	// valid with the same scope, filters and order.
	Cursor string
	// WithURLs resolves each file's URL (presigned per file on S3).
	WithURLs bool
}

// Page is one page of a list.
type Page struct {
	// Files are the page's files; URL is set only with WithURLs.
	Files []*Result
	// NextCursor continues the list; empty on the last page. A page
	// whose filters matched few of the files it read (at most
	// ListScanBudget) holds fewer files than its limit, none at worst,
	// and still has a cursor: follow it until it is empty.
	NextCursor string
}

// List returns one page of the files the caller may see: visible files
// only (never in-flight, deleted or expired ones), within the scope the
// policy decides for OpList -- the caller's own files by default, the
// tenant's (and department's) with the tenant decision. Bad filters and a
// cursor that was not issued for this scope, these filters and this order
// are ErrInvalidMeta; a denied list is ErrNotFound.
func (s *Service) List(ctx context.Context, opts ListOptions) (*Page, error) {
	f, err := listFilter(opts)
	if err != nil {
		return nil, err
	}
	a, err := s.authorize(ctx, OpList, nil, nil)
	if err != nil {
		return nil, err
	}
	key, err := s.signingKey(ctx)
	if err != nil {
		return nil, s.internalError(ctx, ErrNotFound, "load signing key", err)
	}
	bind := f.binding(a)
	after, err := openCursor(key, opts.Cursor, f.sort, bind)
	if err != nil {
		return nil, err
	}
	l, err := s.listRows(ctx, a, f, after)
	if err != nil {
		return nil, s.internalError(ctx, ErrNotFound, "list files", err)
	}
	rows := l.rows
	page := &Page{Files: make([]*Result, 0, min(len(rows), f.limit))}
	switch {
	case len(rows) > f.limit:
		rows = rows[:f.limit]
		page.NextCursor = sealCursor(key, positionOf(f.sort, rows[len(rows)-1]), bind)
	case l.spent != nil:
		page.NextCursor = sealCursor(key, positionOf(f.sort, *l.spent), bind)
	}
	for _, r := range rows {
		res, err := s.listEntry(ctx, r, opts.WithURLs)
		if err != nil {
			return nil, err
		}
		page.Files = append(page.Files, res)
	}
	return page, nil
}

// listEntry is one file of a page, with its URL only when asked for.
func (s *Service) listEntry(ctx context.Context, r db.UploadedFile, withURL bool) (*Result, error) {
	if !withURL {
		return resultFromRow(r, URL{}), nil
	}
	return s.result(ctx, r, s.now())
}

// filter is a checked ListOptions.
type filter struct {
	opts          ListOptions
	sort          ListSort
	limit         int
	contentType   *string
	contentPrefix *string
	namePrefix    *string
	visibility    *string
}

var (
	exactType  = regexp.MustCompile(`^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$`)
	familyType = regexp.MustCompile(`^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/\*$`)
)

// listFilter checks opts: each text filter bounded like the provenance it
// matches, a content type exact or a family, a known order and a page of
// 1..ListMaxLimit.
func listFilter(opts ListOptions) (filter, error) {
	f := filter{opts: opts, sort: opts.Sort, limit: opts.Limit}
	switch f.sort {
	case "":
		f.sort = SortCreatedAt
	case SortCreatedAt, SortName, SortSize:
	default:
		return filter{}, ErrInvalidMeta
	}
	switch {
	case f.limit == 0:
		f.limit = ListDefaultLimit
	case f.limit < 0 || f.limit > ListMaxLimit:
		return filter{}, ErrInvalidMeta
	}
	// The name prefix is bounded like provenance (Type's slot): at most 255
	// characters, no control characters.
	if err := validMeta(&Meta{Module: opts.Module, Entity: opts.Entity, EntityID: opts.EntityID, Type: opts.NamePrefix}); err != nil {
		return filter{}, err
	}
	switch ct := strings.ToLower(opts.ContentType); {
	case ct == "":
	case exactType.MatchString(ct):
		f.contentType = &ct
	case familyType.MatchString(ct):
		p := strings.TrimSuffix(ct, "*")
		f.contentPrefix = &p
	default:
		return filter{}, ErrInvalidMeta
	}
	switch opts.Visibility {
	case "":
	case Public, Private:
		v := string(opts.Visibility)
		f.visibility = &v
	default:
		return filter{}, ErrInvalidMeta
	}
	if opts.CreatedFrom != nil && opts.CreatedBefore != nil && !opts.CreatedFrom.Before(*opts.CreatedBefore) {
		return filter{}, ErrInvalidMeta
	}
	if opts.NamePrefix != "" {
		p := escapeLike(opts.NamePrefix)
		f.namePrefix = &p
	}
	return f, nil
}

// escapeLike makes s a literal LIKE prefix (backslash is the escape).
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// binding is what a cursor is bound to: the scope the policy decided and
// every filter and the order, so a cursor is worthless anywhere else.
func (f filter) binding(a access) string {
	o := f.opts
	parts := []string{a.scope.TenantCode, bindText(a.scope.DepartmentCode), bindText(a.ownerUserID()), string(f.sort),
		o.Module, o.Entity, o.EntityID, strings.ToLower(o.ContentType), string(o.Visibility), boolText(o.Temporary),
		timeText(o.CreatedFrom), timeText(o.CreatedBefore), o.NamePrefix}
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p)) + ":" + p + "\n"))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

func bindText(s *string) string {
	if s == nil {
		return "\x00"
	}
	return *s
}

func boolText(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

func timeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// position is where a page ends: the last row's sort key and id.
type position struct {
	Created time.Time `json:"c,omitzero"`
	Name    string    `json:"n,omitempty"`
	Size    int64     `json:"z,omitempty"`
	ID      uuid.UUID `json:"i"`
}

// start is the sentinel before the first row of each order.
func start(sort ListSort) position {
	switch sort {
	case SortName:
		return position{Name: "", ID: uuid.Nil}
	case SortSize:
		return position{Size: math.MaxInt64, ID: uuid.Max}
	default:
		return position{Created: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), ID: uuid.Max}
	}
}

func positionOf(sort ListSort, r db.UploadedFile) position {
	switch sort {
	case SortName:
		return position{Name: r.OriginalName, ID: r.ID}
	case SortSize:
		return position{Size: r.SizeBytes, ID: r.ID}
	default:
		return position{Created: r.CreatedAt, ID: r.ID}
	}
}

// cursorBody is what a cursor carries.
type cursorBody struct {
	Sort ListSort `json:"s"`
	Bind string   `json:"b"`
	At   position `json:"p"`
}

// sealCursor encodes at as an opaque cursor: base64url(JSON) "." base64url
// (HMAC-SHA256 under the service's signing key, domain-separated from the
// upload targets).
func sealCursor(key []byte, at position, bind string) string {
	b, _ := json.Marshal(cursorBody{Bind: bind, At: at})
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + cursorMAC(key, body)
}

func cursorMAC(key []byte, body string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("uploadedfile-list-cursor\n"))
	mac.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openCursor checks a cursor and returns its position; no cursor is the
// start. A cursor not sealed by this service, or sealed for another scope,
// filter or order, is ErrInvalidMeta.
func openCursor(key []byte, c string, sort ListSort, bind string) (position, error) {
	if c == "" {
		return start(sort), nil
	}
	body, sig, ok := strings.Cut(c, ".")
	if !ok || len(c) > 1024 || !hmac.Equal([]byte(sig), []byte(cursorMAC(key, body))) {
		return position{}, ErrInvalidMeta
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return position{}, ErrInvalidMeta
	}
	var cb cursorBody
	if err := json.Unmarshal(raw, &cb); err != nil || cb.Bind != bind || !utf8.ValidString(cb.At.Name) {
		return position{}, ErrInvalidMeta
	}
	return cb.At, nil
}
