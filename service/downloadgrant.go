package service

import (
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// On the local driver a private file's url is a signed GET of its download
// route, like a presigned S3 GET: it needs no token and no row read.
//
//	{host}/{downloadPath}/{id}/download?expires=…&grant=…
//	{host}/{downloadPath}/{id}/variants/{preset}/download?expires=…&grant=…
//
// The grant is sealed (XChaCha20-Poly1305 under a key derived from the
// signing key the replicas share through the database; its 192-bit random
// nonces stay unique however many URLs a deployment hands out, where
// AES-GCM's 96-bit ones would not): it carries the object's storage key,
// its content type and ETag, the name the bytes are served as and their
// disposition, so the URL names neither the key nor the tenant, and
// nothing in it can be changed or moved to another id, preset or expiry
// (all three are authenticated). Its lifetime is the S3 presigned GET's:
// at most privateDownloadUrlTtlSeconds, never past a temporary file's
// expiry. What the grant cannot know is a later delete: the route then
// answers 404 once the object is gone, as the store does for a presigned
// GET.

// Query parameters of a granted download URL.
const (
	grantExpires = "expires"
	grantParam   = "grant"
)

// Flags of a grant: its bytes are served inline; it carries the object's
// ETag (grants made before it did carry none, and their download reads it
// from the store).
const (
	grantInline = 1 << iota
	grantETag
)

// maxGrantLength bounds a grant before it is decoded: a storage key and a
// file name, each bounded, with the seal's nonce and tag.
const maxGrantLength = 4096

// DownloadGrant is what a granted download URL's query carries: its
// expiry (Unix seconds, as sent) and its sealed grant, both unchecked.
type DownloadGrant struct {
	Expires, Grant string
}

// GrantOf reads a download URL's raw query (url.URL.RawQuery) as
// url.ParseQuery and Values.Get would -- the first of each parameter --
// and ok is false when it carries no grant parameter (the request then
// needs a bearer token). The service's own URLs are plain pairs of
// base64url and digits, read in place: no unescaping pass over the
// grant's 240 bytes and no map, which are most of what parsing the query
// cost a 64 KiB granted download (docs/performance-notes.md). Any other
// query (an escape, a '+' or a ';') goes through url.ParseQuery.
func GrantOf(rawQuery string) (g DownloadGrant, ok bool) {
	if strings.IndexByte(rawQuery, '%') >= 0 || strings.IndexByte(rawQuery, '+') >= 0 || strings.IndexByte(rawQuery, ';') >= 0 {
		q, _ := url.ParseQuery(rawQuery) // as Request.URL.Query: the pairs that parse
		return DownloadGrant{Expires: q.Get(grantExpires), Grant: q.Get(grantParam)}, q.Has(grantParam)
	}
	var hasExpires bool
	for rest := rawQuery; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		k, v, _ := strings.Cut(pair, "=")
		switch {
		case k == grantParam && !ok:
			g.Grant, ok = v, true
		case k == grantExpires && !hasExpires:
			g.Expires, hasExpires = v, true
		}
	}
	return g, ok
}

// grantSealer returns the AEAD that seals download grants, derived once per
// service from the shared signing key.
func (s *Service) grantSealer(ctx context.Context) (cipher.AEAD, error) {
	if a := s.keys.grants.Load(); a != nil {
		return *a, nil
	}
	key, err := s.signingKey(ctx)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("uploadedfile-download-grant-v1"))
	a, err := chacha20poly1305.NewX(mac.Sum(nil))
	if err != nil {
		return nil, err
	}
	s.keys.grants.Store(&a)
	return a, nil
}

// grantAD is what a grant is bound to besides its sealed content.
func grantAD(id uuid.UUID, preset string, expires int64) []byte {
	ad := make([]byte, 0, 64)
	ad = append(ad, id[:]...)
	ad = binary.AppendUvarint(ad, uint64(len(preset)))
	ad = append(ad, preset...)
	return binary.BigEndian.AppendUint64(ad, uint64(expires))
}

// grantedURL is the signed download URL of o (of file id; preset "" for
// the file itself) valid until expires.
func (s *Service) grantedURL(ctx context.Context, id uuid.UUID, preset string, o objectRef, inline bool, expires time.Time) (string, error) {
	a, err := s.grantSealer(ctx)
	if err != nil {
		return "", err
	}
	var flags byte
	if inline {
		flags |= grantInline
	}
	if o.etag != "" {
		flags |= grantETag
	}
	plain := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(o.key)+len(o.contentType)+len(o.etag)+len(o.name))
	plain = append(plain, flags)
	plain = appendField(plain, o.key)
	plain = appendField(plain, o.contentType)
	if o.etag != "" {
		plain = appendField(plain, o.etag)
	}
	plain = append(plain, o.name...)
	sealed := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	_, _ = rand.Read(sealed)
	sealed = a.Seal(sealed, sealed, plain, grantAD(id, preset, expires.Unix()))
	// The query as url.Values would encode it (its keys in order; digits
	// and unpadded URL-safe base64 need no escaping), built in one buffer:
	// a page of 50 files signs 50 of them.
	u := make([]byte, 0, len(o.route)+len("?"+grantExpires+"=&"+grantParam+"=")+20+base64.RawURLEncoding.EncodedLen(len(sealed)))
	u = append(u, o.route...)
	u = append(u, "?"+grantExpires+"="...)
	u = strconv.AppendInt(u, expires.Unix(), 10)
	u = append(u, "&"+grantParam+"="...)
	u = base64.RawURLEncoding.AppendEncode(u, sealed)
	return string(u), nil
}

// DownloadGranted returns the bytes a granted download URL names: the
// file's (preset "") or one of its variants'. The grant is checked before
// anything is looked at: a grant that does not open for this id, preset and
// expiry, or whose expiry has passed, is ErrDownloadURLInvalid -- the same
// answer whether or not the file exists. No row is read; an object deleted
// since is ErrNotFound. g is the URL's query as GrantOf reads it.
func (s *Service) DownloadGranted(ctx context.Context, id, preset string, g DownloadGrant) (*Download, error) {
	if s.store.Kind() == storage.KindS3 {
		return nil, ErrDownloadURLInvalid
	}
	uid, err := uuid.Parse(id)
	if err != nil || len(g.Grant) > maxGrantLength {
		return nil, ErrDownloadURLInvalid
	}
	expires, err := strconv.ParseInt(g.Expires, 10, 64)
	if err != nil {
		return nil, ErrDownloadURLInvalid
	}
	sealed, err := base64.RawURLEncoding.DecodeString(g.Grant)
	if err != nil {
		return nil, ErrDownloadURLInvalid
	}
	a, err := s.grantSealer(ctx)
	if err != nil {
		return nil, s.internalError(ctx, ErrNotFound, "load the signing key", err)
	}
	if len(sealed) < a.NonceSize()+a.Overhead() {
		return nil, ErrDownloadURLInvalid
	}
	nonce, box := sealed[:a.NonceSize()], sealed[a.NonceSize():]
	plain, err := a.Open(box[:0:0], nonce, box, grantAD(uid, preset, expires))
	if err != nil || !s.clock().Before(time.Unix(expires, 0)) {
		return nil, ErrDownloadURLInvalid
	}
	opened, ok := parseGrant(plain)
	if !ok {
		return nil, ErrDownloadURLInvalid
	}
	d := &Download{FileName: opened.name, ContentType: opened.contentType, Disposition: DispositionAttachment}
	if opened.inline {
		d.Disposition = DispositionInline
	}
	err = s.openStored(ctx, d, opened.key, opened.etag)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, ErrNotFound // deleted since the grant was made
	case err != nil:
		return nil, s.internalError(ctx, ErrNotFound, "open stored object", err, "file_id", uid)
	}
	return d, nil
}

// grant is what a download grant carries: the object's storage key, its
// content type, its ETag ("" in a grant made before grants carried it),
// the name it is served as and whether inline.
type grant struct {
	key, contentType, etag, name string
	inline                       bool
}

// appendField appends v length-prefixed.
func appendField(b []byte, v string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// cutField cuts a length-prefixed field off the front of b.
func cutField(b []byte) (v string, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", nil, false
	}
	return string(b[w : w+int(n)]), b[w+int(n):], true
}

// parseGrant reads an opened grant: flags, key, content type, the ETag
// when flagged, then the name (the rest).
func parseGrant(plain []byte) (g grant, ok bool) {
	if len(plain) < 1 {
		return grant{}, false
	}
	g.inline = plain[0]&grantInline != 0
	rest := plain[1:]
	if g.key, rest, ok = cutField(rest); !ok {
		return grant{}, false
	}
	if g.contentType, rest, ok = cutField(rest); !ok {
		return grant{}, false
	}
	if plain[0]&grantETag != 0 {
		if g.etag, rest, ok = cutField(rest); !ok {
			return grant{}, false
		}
	}
	g.name = string(rest)
	return g, true
}
