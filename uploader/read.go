package uploader

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/uploadedfile/uploadedfile/gen/client"
)

// API is the generated client the uploader calls, with the same token, for
// the routes the uploader does not wrap (listing, variants, usage).
func (c *Client) API() *client.ClientWithResponses { return c.api }

// Get returns the details of file id -- the id an upload returned -- with
// a short-lived URL to read it (URL, URLExpiredAt). A file that does not
// exist, or that the caller may not see, is an *Error with status 404;
// a 503 or a network error is retried as the writes are.
func (c *Client) Get(ctx context.Context, id openapi_types.UUID) (*client.UploadedFile, error) {
	var got *client.UploadedFile
	err := c.retry(ctx, func() (int, []byte, http.Header, error) {
		r, err := c.api.GetFileWithResponse(ctx, id)
		if err != nil {
			return 0, nil, nil, err
		}
		got = r.JSON200
		return r.StatusCode(), r.Body, r.HTTPResponse.Header, nil
	})
	return got, err
}

// Download opens the bytes of file id through the URL its details give:
// a presigned store URL as it is, a URL on the service itself with the
// caller's token. The caller closes the body. Errors are Get's, or an
// *Error with the store's or the service's status.
func (c *Client) Download(ctx context.Context, id openapi_types.UUID) (io.ReadCloser, error) {
	f, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.Url == nil {
		return nil, &Error{Status: http.StatusNotFound, Code: "core.file.not-found"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *f.Url, nil)
	if err != nil {
		return nil, fmt.Errorf("uploader: %w", err)
	}
	if strings.HasPrefix(*f.Url, strings.TrimSuffix(c.base, "/")+"/") {
		tok, err := c.token(ctx)
		if err != nil {
			return nil, fmt.Errorf("uploader: token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("uploader: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return nil, problem(resp.StatusCode, body)
	}
	return resp.Body, nil
}
