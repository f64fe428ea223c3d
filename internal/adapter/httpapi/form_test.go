//lint:file-ignore SA1019 the deprecated multipart route is still served, so its refusals are tested
package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// TestMultipartRefusalsSayWhy: a form the multipart route refuses names
// the rule it broke, as every refused upload does -- two files, no file
// part -- and nothing is stored.
func TestMultipartRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	c := s.client(s.token("acme", "alice", nil))
	ctx := context.Background()

	twoFiles := func() (string, *bytes.Buffer) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, name := range []string{"a.pdf", "b.pdf"} {
			part, err := w.CreateFormFile("file", name)
			require.NoError(t, err)
			_, _ = part.Write([]byte(pdf))
		}
		require.NoError(t, w.Close())
		return w.FormDataContentType(), &buf
	}
	noFile := func() (string, *bytes.Buffer) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		require.NoError(t, w.Close())
		return w.FormDataContentType(), &buf
	}
	for rule, form := range map[string]func() (string, *bytes.Buffer){
		"multipart.too-many-files": twoFiles,
		"multipart.no-file":        noFile,
	} {
		ct, body := form()
		resp, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode(), "%s: %s", rule, resp.Body)
		var p struct{ Code, Rule string }
		require.NoError(t, json.Unmarshal(resp.Body, &p))
		require.Equal(t, service.ErrInvalidUpload.Code, p.Code, rule)
		require.Equal(t, rule, p.Rule, "the refusal names its rule: %s", resp.Body)
	}
	list, err := c.ListFilesWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, list.JSON200.Items, "nothing was stored")
}
