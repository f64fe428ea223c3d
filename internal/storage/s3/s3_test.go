package s3_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagetest"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

func newStore(t *testing.T) *s3store.Store {
	t.Helper()
	s, err := s3store.New(context.Background(), s3test.New(t))
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storagetest.Run(t, func(t *testing.T) storage.Store { return newStore(t) })
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cfg  s3store.Config
		want string
	}{
		{"bucket required", s3store.Config{}, "bucket is required"},
		{"blank bucket", s3store.Config{Bucket: "  "}, "bucket is required"},
		{"id without key", s3store.Config{Bucket: "b", AccessID: "id"}, "together"},
		{"key without id", s3store.Config{Bucket: "b", AccessKey: "key"}, "together"},
		{"blank pair", s3store.Config{Bucket: "b", AccessID: " ", AccessKey: " "}, "must not be blank"},
		{"unknown public access mode", s3store.Config{Bucket: "b", PublicAccessMode: "public"}, "publicAccessMode"},
	} {
		_, err := s3store.New(ctx, c.cfg)
		require.ErrorContains(t, err, c.want, c.name)
	}
}

// TestDefaultCredentialChain: without an explicit pair the SDK's default
// credential chain is used -- here the environment. Not parallel: it sets
// environment variables.
func TestDefaultCredentialChain(t *testing.T) {
	ctx := context.Background()
	cfg := s3test.New(t)
	t.Setenv("AWS_ACCESS_KEY_ID", cfg.AccessID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", cfg.AccessKey)
	cfg.AccessID, cfg.AccessKey = "", ""
	s, err := s3store.New(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx), "credentials from the default chain")
}

func TestPing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	require.NoError(t, s.Ping(context.Background()))
	cfg := s3test.New(t)
	cfg.Bucket = "no-such-bucket"
	missing, err := s3store.New(context.Background(), cfg)
	require.NoError(t, err)
	require.Error(t, missing.Ping(context.Background()))
}

// TestPublicAccessMode: object-acl sends the public-read ACL for public
// objects only; external never sends one. versitygw accepts the header but
// does not serve GetObjectAcl, so the test reads what the driver sent.
func TestPublicAccessMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		mode   string
		public bool
		want   string
	}{
		{s3store.PublicAccessObjectACL, true, "public-read"},
		{s3store.PublicAccessObjectACL, false, ""},
		{s3store.PublicAccessExternal, true, ""},
		{"", true, ""}, // the default is external
	} {
		rec := &aclRecorder{next: http.DefaultTransport}
		cfg := s3test.New(t)
		cfg.PublicAccessMode = c.mode
		cfg.HTTPClient = &http.Client{Transport: rec}
		s, err := s3store.New(ctx, cfg)
		require.NoError(t, err)
		oi, err := s.Put(ctx, "core/x/obj", strings.NewReader("x"), storage.PutOptions{Size: 1, Public: c.public})
		require.NoError(t, err, "%s public=%v", c.mode, c.public)
		require.Equal(t, []string{c.want}, rec.puts, "%q public=%v", c.mode, c.public)
		// A promotion is a copy, and a copy does not keep the ACL: it is
		// asked for again (a public direct upload's staging object is private).
		_, err = s.Promote(ctx, "core/x/obj", "core/x/promoted", oi.ETag, storage.PromoteOptions{Public: c.public})
		require.NoError(t, err)
		require.Equal(t, []string{c.want}, rec.copies, "promote: %q public=%v", c.mode, c.public)
	}
}

// aclRecorder records the x-amz-acl header of every PUT and every copy.
type aclRecorder struct {
	next   http.RoundTripper
	mu     sync.Mutex
	puts   []string
	copies []string
}

func (a *aclRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut {
		a.mu.Lock()
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			a.copies = append(a.copies, r.Header.Get("X-Amz-Acl"))
		} else {
			a.puts = append(a.puts, r.Header.Get("X-Amz-Acl"))
		}
		a.mu.Unlock()
	}
	return a.next.RoundTrip(r)
}
