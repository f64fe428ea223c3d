// Package storagetest is the conformance suite every storage driver must
// pass: one set of behaviours, run against the local driver and against a
// real S3-compatible server.
package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Factory returns a fresh, empty store for one test.
type Factory func(t *testing.T) storage.Store

// Run runs the whole suite against the stores newStore returns.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s storage.Store)
	}{
		{"PutStatOpen", testPutStatOpen},
		{"Ranges", testRanges},
		{"Missing", testMissing},
		{"NoOverwrite", testNoOverwrite},
		{"PutRefusesWrongSizeOrChecksum", testPutRefusesWrongSizeOrChecksum},
		{"Promote", testPromote},
		{"PromoteRefusesStaleSource", testPromoteRefusesStaleSource},
		{"DeleteIsIdempotent", testDeleteIsIdempotent},
		{"InvalidKeys", testInvalidKeys},
		{"PresignLifetimeBounded", testPresignLifetimeBounded},
		{"PresignedPut", testPresignedPut},
		{"PresignedPutRefusals", testPresignedPutRefusals},
		{"PresignedGet", testPresignedGet},
		{"PresignedExpiry", testPresignedExpiry},
		{"LargeObject", testLargeObject},
		{"SpoolCommit", testSpoolCommit},
		{"SpoolRefusals", testSpoolRefusals},
		{"SpoolClosedUncommitted", testSpoolClosedUncommitted},
		{"ListInKeyOrder", testListInKeyOrder},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore(t))
		})
	}
}

var ctx = context.Background()

func key(name string) string { return "core/t-mfrggzdf/" + uuid.NewString() + "/" + name }

func sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func put(t *testing.T, s storage.Store, k string, body []byte, ct string) storage.ObjectInfo {
	t.Helper()
	oi, err := s.Put(ctx, k, bytes.NewReader(body), storage.PutOptions{ContentType: ct, Size: int64(len(body)), SHA256: sum(body)})
	require.NoError(t, err)
	return oi
}

func read(t *testing.T, s storage.Store, k string, rng *storage.Range) string {
	t.Helper()
	rc, err := s.Open(ctx, k, rng)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

func requireAbsent(t *testing.T, s storage.Store, k string, msg string) {
	t.Helper()
	_, err := s.Stat(ctx, k)
	require.ErrorIs(t, err, storage.ErrNotFound, msg)
}

func testPutStatOpen(t *testing.T, s storage.Store) {
	k := key("obj.txt")
	body := []byte("@test-data@")
	oi := put(t, s, k, body, "text/plain")
	require.Equal(t, k, oi.Key)
	require.EqualValues(t, 11, oi.Size)
	require.NotEmpty(t, oi.ETag)

	st, err := s.Stat(ctx, k)
	require.NoError(t, err)
	require.EqualValues(t, 11, st.Size)
	require.Equal(t, oi.ETag, st.ETag)
	require.Equal(t, "text/plain", st.ContentType)
	require.Equal(t, sum(body), st.SHA256, "the SHA-256 is known for objects written with one")
	require.WithinDuration(t, time.Now(), st.LastModified, time.Minute)
	require.Equal(t, "@test-data@", read(t, s, k, nil))

	// Put without a declared checksum: the driver still stores the bytes.
	k2 := key("nochecksum.bin")
	_, err = s.Put(ctx, k2, strings.NewReader("xyz"), storage.PutOptions{ContentType: "application/octet-stream", Size: 3})
	require.NoError(t, err)
	require.Equal(t, "xyz", read(t, s, k2, nil))
}

func testRanges(t *testing.T, s storage.Store) {
	k := key("obj.txt")
	put(t, s, k, []byte("@test-data@"), "text/plain")
	require.Equal(t, "tes", read(t, s, k, &storage.Range{Offset: 1, Length: 3}))
	require.Equal(t, "test-data@", read(t, s, k, &storage.Range{Offset: 1, Length: -1}))
	require.Equal(t, "st-data@", read(t, s, k, &storage.Range{Offset: 3, Length: 9999}), "a length past the end reads to the end")
	require.Equal(t, "@", read(t, s, k, &storage.Range{Offset: 10, Length: 1}))
	_, err := s.Open(ctx, k, &storage.Range{Offset: 11, Length: 1})
	require.ErrorIs(t, err, storage.ErrInvalidArgument, "a range starting past the end")
}

func testMissing(t *testing.T, s storage.Store) {
	k := key("missing.txt")
	_, err := s.Stat(ctx, k)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = s.Open(ctx, k, nil)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = s.Open(ctx, k, &storage.Range{Offset: 0, Length: 1})
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func testNoOverwrite(t *testing.T, s storage.Store) {
	k := key("once.txt")
	put(t, s, k, []byte("first"), "text/plain")
	_, err := s.Put(ctx, k, strings.NewReader("second"), storage.PutOptions{ContentType: "text/plain", Size: 6})
	require.ErrorIs(t, err, storage.ErrExists)
	require.Equal(t, "first", read(t, s, k, nil))
}

func testPutRefusesWrongSizeOrChecksum(t *testing.T, s storage.Store) {
	for _, c := range []struct {
		name string
		body string
		opts storage.PutOptions
	}{
		{"shorter than declared", "abc", storage.PutOptions{ContentType: "text/plain", Size: 4}},
		{"longer than declared", "abcde", storage.PutOptions{ContentType: "text/plain", Size: 4}},
		{"checksum differs", "abcd", storage.PutOptions{ContentType: "text/plain", Size: 4, SHA256: sum([]byte("abce"))}},
	} {
		k := key("bad.txt")
		_, err := s.Put(ctx, k, strings.NewReader(c.body), c.opts)
		require.ErrorIs(t, err, storage.ErrPrecondition, c.name)
		requireAbsent(t, s, k, c.name+": nothing is left behind")
	}
}

func testPromote(t *testing.T, s storage.Store) {
	src, dst := key("staging.bin"), key("final.bin")
	body := []byte("promoted bytes")
	oi := put(t, s, src, body, "application/octet-stream")

	promoted, err := s.Promote(ctx, src, dst, oi.ETag, storage.PromoteOptions{})
	require.NoError(t, err)
	require.EqualValues(t, len(body), promoted.Size)
	require.Equal(t, sum(body), promoted.SHA256, "the final object's SHA-256 is known, for verification")
	require.Equal(t, string(body), read(t, s, dst, nil))
	require.Equal(t, string(body), read(t, s, src, nil), "the source is untouched")

	_, err = s.Promote(ctx, src, dst, oi.ETag, storage.PromoteOptions{})
	require.ErrorIs(t, err, storage.ErrExists, "never overwrites")

	_, err = s.Promote(ctx, key("missing.bin"), key("x.bin"), oi.ETag, storage.PromoteOptions{})
	require.Error(t, err)
	require.True(t, isNotFoundOrPrecondition(err), "a missing source: %v", err)
}

func isNotFoundOrPrecondition(err error) bool {
	return errorsIs(err, storage.ErrNotFound) || errorsIs(err, storage.ErrPrecondition)
}

func testPromoteRefusesStaleSource(t *testing.T, s storage.Store) {
	src, dst := key("staging.bin"), key("final.bin")
	old := put(t, s, src, []byte("verified version"), "application/octet-stream")
	require.NoError(t, s.Delete(ctx, src))
	put(t, s, src, []byte("replaced version"), "application/octet-stream")

	_, err := s.Promote(ctx, src, dst, old.ETag, storage.PromoteOptions{})
	require.ErrorIs(t, err, storage.ErrPrecondition)
	requireAbsent(t, s, dst, "a refused promotion creates nothing")
}

func testDeleteIsIdempotent(t *testing.T, s storage.Store) {
	k := key("gone.txt")
	put(t, s, k, []byte("x"), "text/plain")
	require.NoError(t, s.Delete(ctx, k))
	requireAbsent(t, s, k, "deleted")
	require.NoError(t, s.Delete(ctx, k), "absent counts as deleted")
	require.NoError(t, s.Delete(ctx, key("never.txt")))
	// The key can be written again after deletion.
	put(t, s, k, []byte("y"), "text/plain")
	require.Equal(t, "y", read(t, s, k, nil))
}

func testInvalidKeys(t *testing.T, s storage.Store) {
	for _, k := range []string{"", "/abs", "a//b", "a/./b", "a/../b", "../escape", "a/..", "trailing/", "back\\slash", "nul\x00", strings.Repeat("k", 1025)} {
		_, err := s.Put(ctx, k, strings.NewReader("x"), storage.PutOptions{Size: 1})
		require.ErrorIs(t, err, storage.ErrInvalidKey, "put %q", k)
		_, err = s.Stat(ctx, k)
		require.ErrorIs(t, err, storage.ErrInvalidKey, "stat %q", k)
		require.ErrorIs(t, s.Delete(ctx, k), storage.ErrInvalidKey, "delete %q", k)
		_, err = s.Open(ctx, k, nil)
		require.ErrorIs(t, err, storage.ErrInvalidKey, "open %q", k)
	}
}

func testPresignLifetimeBounded(t *testing.T, s storage.Store) {
	k := key("x.txt")
	for _, d := range []time.Duration{0, -time.Second, time.Hour + time.Second} {
		_, err := s.PresignPut(ctx, k, storage.PresignPutOptions{ContentType: "text/plain", Size: 1, Expires: d})
		require.ErrorIs(t, err, storage.ErrInvalidArgument, "put lifetime %s", d)
		_, err = s.PresignGet(ctx, k, storage.PresignGetOptions{Expires: d})
		require.ErrorIs(t, err, storage.ErrInvalidArgument, "get lifetime %s", d)
	}
	p, err := s.PresignGet(ctx, k, storage.PresignGetOptions{Expires: time.Hour})
	require.NoError(t, err, "exactly one hour is allowed")
	require.WithinDuration(t, time.Now().Add(time.Hour), p.ExpiresAt, 5*time.Second)
}

// send performs a presigned request with body, letting mutate change it.
func send(t *testing.T, p storage.Presigned, body []byte, mutate func(*http.Request)) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(p.Method, p.URL, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range p.Header {
		req.Header[k] = v
	}
	req.ContentLength = int64(len(body))
	req.Header.Del("Content-Length") // net/http sets it from ContentLength
	if mutate != nil {
		mutate(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func presignPut(t *testing.T, s storage.Store, k string, body []byte, ct string, d time.Duration) storage.Presigned {
	t.Helper()
	p, err := s.PresignPut(ctx, k, storage.PresignPutOptions{ContentType: ct, Size: int64(len(body)), SHA256: sum(body), Expires: d})
	require.NoError(t, err)
	require.Equal(t, http.MethodPut, p.Method)
	require.Equal(t, ct, p.Header.Get("Content-Type"), "the content type is a signed header the client sends")
	return p
}

func testPresignedPut(t *testing.T, s storage.Store) {
	k := key("direct.docx")
	body := []byte("PK\x03\x04 pretend docx bytes")
	ct := "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	p := presignPut(t, s, k, body, ct, time.Minute)
	u, err := url.Parse(p.URL)
	require.NoError(t, err)
	for name := range u.Query() {
		require.NotContains(t, []string{"x-amz-checksum-sha256", "content-type", "content-length", "if-none-match"}, strings.ToLower(name),
			"signed headers stay headers, never hoisted into the query string")
	}
	require.Equal(t, "*", p.Header.Get("If-None-Match"), "a second write is refused by the store")

	status, msg := send(t, p, body, nil)
	require.Equal(t, http.StatusOK, status, "%s", msg)
	st, err := s.Stat(ctx, k)
	require.NoError(t, err)
	require.EqualValues(t, len(body), st.Size)
	require.Equal(t, ct, st.ContentType)
	require.Equal(t, sum(body), st.SHA256)

	status, _ = send(t, p, body, nil)
	require.GreaterOrEqual(t, status, 400, "a second write through the same URL is refused")
	require.Equal(t, string(body), read(t, s, k, nil))
}

func testPresignedPutRefusals(t *testing.T, s storage.Store) {
	body := []byte("exactly these bytes")
	ct := "text/plain"
	for _, c := range []struct {
		name   string
		body   []byte
		mutate func(*http.Request)
	}{
		{"wrong length", body[:len(body)-1], nil},
		{"wrong content type", body, func(r *http.Request) { r.Header.Set("Content-Type", "application/pdf") }},
		{"wrong checksum (same length, other bytes)", []byte(strings.ToUpper(string(body))), nil},
		{"tampered signature", body, func(r *http.Request) { r.URL.RawQuery = tamper(r.URL.RawQuery) }},
		{"other key in the URL", body, func(r *http.Request) { r.URL.Path += "x" }},
	} {
		k := key("refused.txt")
		p := presignPut(t, s, k, body, ct, time.Minute)
		status, _ := send(t, p, c.body, c.mutate)
		require.GreaterOrEqual(t, status, 400, c.name)
		require.Less(t, status, 500, c.name)
		requireAbsent(t, s, k, c.name+": nothing is written")
	}
}

// tamper flips one character of the signature parameter.
func tamper(rawQuery string) string {
	q, _ := url.ParseQuery(rawQuery)
	for _, name := range []string{"X-Amz-Signature", "sig"} {
		if v := q.Get(name); v != "" {
			b := []byte(v)
			if b[0] == 'a' {
				b[0] = 'b'
			} else {
				b[0] = 'a'
			}
			q.Set(name, string(b))
		}
	}
	return q.Encode()
}

func testPresignedGet(t *testing.T, s storage.Store) {
	k := key("report.pdf")
	put(t, s, k, []byte("%PDF-1.7 body"), "application/pdf")
	p, err := s.PresignGet(ctx, k, storage.PresignGetOptions{
		Expires: time.Minute, ContentDisposition: `attachment; filename*=UTF-8''r%C3%A9port.pdf`, ContentType: "application/pdf",
	})
	require.NoError(t, err)
	require.Equal(t, http.MethodGet, p.Method)

	resp, err := http.Get(p.URL)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "%PDF-1.7 body", string(b))
	require.Equal(t, `attachment; filename*=UTF-8''r%C3%A9port.pdf`, resp.Header.Get("Content-Disposition"))
	require.Equal(t, "application/pdf", resp.Header.Get("Content-Type"))

	req, _ := http.NewRequest(http.MethodGet, p.URL, nil)
	req.Header.Set("Range", "bytes=0-3")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	require.Equal(t, "%PDF", string(b))

	status, _ := send(t, storage.Presigned{Method: http.MethodGet, URL: p.URL}, nil, func(r *http.Request) { r.URL.RawQuery = tamper(r.URL.RawQuery) })
	require.Equal(t, http.StatusForbidden, status, "a tampered GET signature")
}

func testPresignedExpiry(t *testing.T, s storage.Store) {
	k := key("soon.txt")
	put(t, s, k, []byte("soon gone"), "text/plain")
	get, err := s.PresignGet(ctx, k, storage.PresignGetOptions{Expires: time.Second})
	require.NoError(t, err)
	pk := key("late.txt")
	putReq := presignPut(t, s, pk, []byte("late"), "text/plain", time.Second)

	time.Sleep(2100 * time.Millisecond)
	status, _ := send(t, get, nil, nil)
	require.Equal(t, http.StatusForbidden, status, "an expired GET")
	status, _ = send(t, putReq, []byte("late"), nil)
	require.Equal(t, http.StatusForbidden, status, "an expired PUT")
	requireAbsent(t, s, pk, "nothing written after expiry")
}

func testLargeObject(t *testing.T, s storage.Store) {
	k := key("large.bin")
	body := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16+7) // a little over 5 MiB
	oi := put(t, s, k, body, "application/octet-stream")
	require.EqualValues(t, len(body), oi.Size)
	rc, err := s.Open(ctx, k, &storage.Range{Offset: int64(len(body)) - 16, Length: 16})
	require.NoError(t, err)
	tail, _ := io.ReadAll(rc)
	rc.Close()
	require.Equal(t, string(body[len(body)-16:]), string(tail))
	require.Equal(t, fmt.Sprintf("%x", sum(body)), fmt.Sprintf("%x", oi.SHA256))
}

// spool returns a spool of s (the driver's own, or the temporary-file one)
// holding body, written in uneven pieces.
func spool(t *testing.T, s storage.Store, body []byte) storage.Spool {
	t.Helper()
	sp, err := storage.NewSpool(ctx, s, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sp.Close() })
	for rest := body; len(rest) > 0; {
		n := min(len(rest), 4093)
		w, err := sp.Write(rest[:n])
		require.NoError(t, err)
		require.Equal(t, n, w)
		rest = rest[n:]
	}
	return sp
}

func testSpoolCommit(t *testing.T, s storage.Store) {
	body := bytes.Repeat([]byte("spooled-bytes-"), 1<<20/14+3)
	sp := spool(t, s, body)
	require.EqualValues(t, len(body), sp.Size())
	require.Equal(t, sum(body), sp.SHA256(), "the spool hashes what is written")
	got := make([]byte, 20)
	n, err := sp.ReadAt(got, 700001)
	require.NoError(t, err)
	require.Equal(t, string(body[700001:700021]), string(got[:n]), "the spool reads back at any offset")

	k := key("spooled.bin")
	oi, err := sp.Commit(ctx, k, storage.PutOptions{ContentType: "application/x-test", Size: int64(len(body)), SHA256: sum(body)})
	require.NoError(t, err)
	require.Equal(t, k, oi.Key)
	require.EqualValues(t, len(body), oi.Size)
	st, err := s.Stat(ctx, k)
	require.NoError(t, err)
	require.Equal(t, oi.ETag, st.ETag)
	require.Equal(t, "application/x-test", st.ContentType)
	require.Equal(t, sum(body), st.SHA256)
	require.Equal(t, string(body), read(t, s, k, nil))

	_, err = sp.Commit(ctx, key("again.bin"), storage.PutOptions{ContentType: "application/x-test", Size: int64(len(body))})
	require.ErrorIs(t, err, storage.ErrSpoolCommitted, "a spool commits once")
	_, err = sp.Write([]byte("more"))
	require.ErrorIs(t, err, storage.ErrSpoolCommitted, "a committed spool takes no writes")
	require.NoError(t, sp.Close())
	require.Equal(t, string(body), read(t, s, k, nil), "closing a committed spool keeps the object")
}

func testSpoolRefusals(t *testing.T, s storage.Store) {
	body := []byte("abcd")
	sp := spool(t, s, body)
	for _, c := range []struct {
		name string
		opts storage.PutOptions
		want error
	}{
		{"shorter than declared", storage.PutOptions{ContentType: "text/plain", Size: 5}, storage.ErrPrecondition},
		{"longer than declared", storage.PutOptions{ContentType: "text/plain", Size: 3}, storage.ErrPrecondition},
		{"checksum differs", storage.PutOptions{ContentType: "text/plain", Size: 4, SHA256: sum([]byte("abce"))}, storage.ErrPrecondition},
	} {
		k := key("bad.txt")
		_, err := sp.Commit(ctx, k, c.opts)
		require.ErrorIs(t, err, c.want, c.name)
		requireAbsent(t, s, k, c.name+": nothing is left behind")
	}
	_, err := sp.Commit(ctx, "a/../b", storage.PutOptions{ContentType: "text/plain", Size: 4})
	require.ErrorIs(t, err, storage.ErrInvalidKey)

	taken := key("taken.txt")
	put(t, s, taken, []byte("first"), "text/plain")
	_, err = sp.Commit(ctx, taken, storage.PutOptions{ContentType: "text/plain", Size: 4, SHA256: sum(body)})
	require.ErrorIs(t, err, storage.ErrExists, "a commit never overwrites")
	require.Equal(t, "first", read(t, s, taken, nil))

	k := key("after-refusals.txt")
	_, err = sp.Commit(ctx, k, storage.PutOptions{ContentType: "text/plain", Size: 4, SHA256: sum(body)})
	require.NoError(t, err, "a refused commit leaves the spool usable")
	require.Equal(t, "abcd", read(t, s, k, nil))
}

func testSpoolClosedUncommitted(t *testing.T, s storage.Store) {
	sp := spool(t, s, []byte("discarded"))
	require.NoError(t, sp.Close())
	k := key("never.txt")
	_, err := sp.Commit(ctx, k, storage.PutOptions{ContentType: "text/plain", Size: 9})
	require.Error(t, err, "a closed spool cannot be committed")
	requireAbsent(t, s, k, "a closed spool leaves no object")
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// testListInKeyOrder: List yields every object under the prefix exactly
// once, in byte order of the keys -- a directory named "a" sorts after a
// file or directory named "a-b", as S3 orders "a/x" after "a-b/x" -- with
// its size and modification time, and stops at the callback's error;
// resumed after a key, it yields exactly the keys after it.
func testListInKeyOrder(t *testing.T, s storage.Store) {
	base := "list/" + uuid.NewString() + "/"
	names := []string{"a/x", "a-b/x", "a.txt", "a/y/z", "b", "a0", "A", "a/y-", "été"}
	for _, n := range names {
		put(t, s, base+n, []byte(n), "text/plain")
	}
	put(t, s, "list/outside", []byte("x"), "text/plain")
	want := make([]string, len(names))
	for i, n := range names {
		want[i] = base + n
	}
	slices.Sort(want) // byte order
	var got []string
	require.NoError(t, s.List(ctx, base, "", func(oi storage.ObjectInfo) error {
		got = append(got, oi.Key)
		require.Equal(t, int64(len(strings.TrimPrefix(oi.Key, base))), oi.Size, oi.Key)
		require.False(t, oi.LastModified.IsZero(), oi.Key)
		return nil
	}))
	require.Equal(t, want, got)

	got = nil
	require.NoError(t, s.List(ctx, base+"a/", "", func(oi storage.ObjectInfo) error { got = append(got, oi.Key); return nil }))
	require.Equal(t, []string{base + "a/x", base + "a/y-", base + "a/y/z"}, got, "a prefix inside a directory")

	// Resumed after each key in turn (and after keys no object has):
	// exactly the keys that follow it, in order.
	for i, after := range append(slices.Clone(want), base+"a/", base+"a/y", base+"a/y/", base+"a-", base) {
		got = nil
		require.NoError(t, s.List(ctx, base, after, func(oi storage.ObjectInfo) error { got = append(got, oi.Key); return nil }))
		var rest []string
		for _, k := range want {
			if k > after {
				rest = append(rest, k)
			}
		}
		require.Equal(t, rest, got, "after %q (%d)", after, i)
	}

	stop := errors.New("stop")
	n := 0
	require.ErrorIs(t, s.List(ctx, base, "", func(storage.ObjectInfo) error { n++; return stop }), stop)
	require.Equal(t, 1, n)
}
