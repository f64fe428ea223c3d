package service_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/service"
)

// publicReadPolicy is what `mc anonymous set download <alias>/<bucket>/<prefix>`
// writes: anonymous GetObject on the public prefix only (docs/operations.md).
func publicReadPolicy(bucket, prefix string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::%s/%s*"]}]}`, bucket, prefix)
}

// TestPublicFilesOnABucketPolicy (MinIO, ACLs unused): in the default
// external mode public objects live under their own prefix, so a bucket
// policy exposes them -- buffer and direct uploads alike -- while a private
// object's unsigned URL is refused.
func TestPublicFilesOnABucketPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := s3test.SharedOf(t, s3test.MinIO)
	s3cfg := srv.NewBucket(t)
	_, err := srv.Client().PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{
		Bucket: aws.String(s3cfg.Bucket), Policy: aws.String(publicReadPolicy(s3cfg.Bucket, "core/_public/")),
	})
	require.NoError(t, err)
	store, err := s3store.New(ctx, s3cfg)
	require.NoError(t, err)
	cdn := srv.Endpoint + "/" + s3cfg.Bucket
	svc, err := service.New(ctx, service.Config{Driver: service.DriverS3, Bucket: s3cfg.Bucket, CDNBaseURL: cdn, AllowPublicUploads: true},
		setup(t, service.DriverLocal).db, service.WithStore(store), service.WithLogger(quiet()))
	require.NoError(t, err)

	buffered, err := svc.Upload(alice, strings.NewReader(pdf), "public.pdf", &service.UploadOptions{Visibility: service.Public})
	require.NoError(t, err)
	body := realDOCX(t)
	init, err := svc.InitiateUpload(alice, input("public.docx", docxType, body), &service.UploadOptions{Visibility: service.Public})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, putTarget(t, init.Upload, body))
	direct, err := svc.CompleteUpload(alice, init.ID.String())
	require.NoError(t, err)
	private, err := svc.Upload(alice, strings.NewReader(pdf), "private.pdf", nil)
	require.NoError(t, err)

	for _, f := range []struct {
		r    *service.Result
		body []byte
	}{{buffered, []byte(pdf)}, {direct, body}} {
		require.True(t, strings.HasPrefix(f.r.Key, "core/_public/"), f.r.Key)
		require.Nil(t, f.r.URLExpiredAt, "a public URL is stable")
		require.True(t, strings.HasPrefix(f.r.URL, cdn+"/core/_public/"), "the cdn URL names the public object: %s", f.r.URL)
		status, got := anonymousGet(t, f.r.URL)
		require.Equal(t, http.StatusOK, status, "a public file answers anonymously")
		require.Equal(t, f.body, got)
	}
	require.False(t, strings.Contains(private.Key, "_public"), private.Key)
	status, _ := anonymousGet(t, cdn+"/"+private.Key)
	require.Equal(t, http.StatusForbidden, status, "a private object's unsigned URL is refused")
	status, _ = anonymousGet(t, cdn+"/"+*(mustRowPendingKey(t, svc, init.ID.String())))
	require.Equal(t, http.StatusForbidden, status, "the staging object of a public upload is private")
}

func anonymousGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// mustRowPendingKey is the staging key a direct upload had: the final key
// with the public prefix replaced by the staging one.
func mustRowPendingKey(t *testing.T, svc *service.Service, id string) *string {
	t.Helper()
	r, err := svc.Find(alice, id)
	require.NoError(t, err)
	k := strings.Replace(r.Key, "core/_public/", "core/_staging/", 1)
	return &k
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
