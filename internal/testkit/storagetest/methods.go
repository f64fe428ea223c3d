package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
)

// methodCall is one call of a storage.Store method and the operation name
// the wrappers record it under (snake case: presign_get).
type methodCall struct {
	op   string
	call func(ctx context.Context, s storage.Store) error
}

// methodCalls holds one call of every method of storage.Store.
func methodCalls(k string) map[string]methodCall {
	body := []byte("every method")
	return map[string]methodCall{
		"Kind": {"kind", func(context.Context, storage.Store) error { return nil }},
		"Put": {"put", func(ctx context.Context, s storage.Store) error {
			_, err := s.Put(ctx, k, bytes.NewReader(body), storage.PutOptions{Size: int64(len(body)), ContentType: "text/plain", SHA256: sum(body)})
			return err
		}},
		"Stat": {"stat", func(ctx context.Context, s storage.Store) error { _, err := s.Stat(ctx, k); return err }},
		"Open": {"open", func(ctx context.Context, s storage.Store) error {
			rc, err := s.Open(ctx, k, nil)
			if err == nil {
				err = rc.Close()
			}
			return err
		}},
		"Promote": {"promote", func(ctx context.Context, s storage.Store) error {
			oi, err := s.Stat(ctx, k)
			if err != nil {
				return err
			}
			_, err = s.Promote(ctx, k, k+".promoted", oi.ETag, storage.PromoteOptions{})
			return err
		}},
		"PresignPut": {"presign_put", func(ctx context.Context, s storage.Store) error {
			_, err := s.PresignPut(ctx, k+".put", storage.PresignPutOptions{Size: 1, ContentType: "text/plain", SHA256: sum([]byte("x")), Expires: time.Minute})
			return err
		}},
		"PresignGet": {"presign_get", func(ctx context.Context, s storage.Store) error {
			_, err := s.PresignGet(ctx, k, storage.PresignGetOptions{Expires: time.Minute})
			return err
		}},
		"List": {"list", func(ctx context.Context, s storage.Store) error {
			return s.List(ctx, "core/", "", func(storage.ObjectInfo) error { return nil })
		}},
		"Delete": {"delete", func(ctx context.Context, s storage.Store) error { return s.Delete(ctx, k) }},
		"Ping":   {"ping", func(ctx context.Context, s storage.Store) error { return s.Ping(ctx) }},
		"Close":  {"close", func(_ context.Context, s storage.Store) error { return s.Close() }},
	}
}

// EveryMethod calls every method of storage.Store on the wrapper w (Close
// last) and requires recorded(op) after each but those in unrecorded: a
// method added to storage.Store without a case here, or a wrapper that
// lets one pass through without recording it, fails the test. A call's
// own error does not matter (a driver may not presign); what it recorded
// does.
func EveryMethod(t *testing.T, w storage.Store, recorded func(op string) bool, unrecorded ...string) {
	t.Helper()
	calls := methodCalls(key("every-method.txt"))
	skip := map[string]bool{}
	for _, m := range unrecorded {
		skip[m] = true
	}
	iface := reflect.TypeOf((*storage.Store)(nil)).Elem()
	var names []string
	for i := range iface.NumMethod() {
		names = append(names, iface.Method(i).Name)
	}
	order := []string{"Kind", "Put", "Stat", "Open", "Promote", "PresignPut", "PresignGet", "List", "Delete", "Ping", "Close"}
	require.ElementsMatch(t, names, order, "storagetest: every method of storage.Store has a call here (methods.go)")
	for _, name := range order {
		c := calls[name]
		_ = c.call(context.Background(), w)
		if skip[name] {
			continue
		}
		require.True(t, recorded(c.op), "%s was called and not recorded as %q: the wrapper must handle it", name, c.op)
	}
}

// Local returns a local store on a temporary root whose presigned URLs are
// served by a loopback test server; both end with t.
func Local(t *testing.T) *local.Store {
	t.Helper()
	// The listener exists before the store (whose URLs name it); the server
	// starts once its handler is in place.
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	s, err := local.New(local.Config{Root: t.TempDir(), PresignBaseURL: "http://" + srv.Listener.Addr().String() + "/_storage", PresignSecret: secret})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	srv.Config.Handler = http.StripPrefix("/_storage", s.Handler())
	srv.Start()
	return s
}
