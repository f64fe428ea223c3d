package s3_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
)

// TestBucketCORS applies the bucket CORS rule of docs/browser.md (on
// versitygw; MinIO has no bucket CORS API and takes the same origins as a
// server-wide setting) and checks what a browser's preflight for a
// presigned PUT gets: the allowed origin may send the signed headers and
// read the ETag, another origin is refused.
func TestBucketCORS(t *testing.T) {
	t.Parallel()
	srv := s3test.Shared(t)
	cfg := srv.NewBucket(t)
	if srv.Kind != s3test.MinIO {
		_, err := srv.Client().PutBucketCors(context.Background(), &awss3.PutBucketCorsInput{
			Bucket: aws.String(cfg.Bucket), CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{s3test.BucketCORSRule(s3test.BrowserOrigin)}},
		})
		require.NoError(t, err)
	}
	preflight := func(origin string) *http.Response {
		req, err := http.NewRequest(http.MethodOptions, srv.Endpoint+"/"+cfg.Bucket+"/core/_staging/t-x/a.pdf", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", http.MethodPut)
		req.Header.Set("Access-Control-Request-Headers", "content-type,if-none-match,x-amz-checksum-sha256")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	ok := preflight(s3test.BrowserOrigin)
	require.Less(t, ok.StatusCode, 300)
	require.Equal(t, s3test.BrowserOrigin, ok.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, ok.Header.Get("Access-Control-Allow-Methods"), http.MethodPut)
	if srv.Kind != s3test.MinIO { // MinIO exposes every response header
		require.Equal(t, "ETag", ok.Header.Get("Access-Control-Expose-Headers"))
	}
	other := preflight("https://elsewhere.example.test")
	require.NotEqual(t, "https://elsewhere.example.test", other.Header.Get("Access-Control-Allow-Origin"), "an origin outside the rule is refused")
}
