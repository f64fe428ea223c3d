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

	"github.com/uploadedfile/uploadedfile/gen/client"
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

// TestRefusalsSayTheLimit: a refusal's detail is a sentence a person
// reads, and a file over the size limit is told the limit -- for a buffer
// upload and for a direct upload's declared size alike.
func TestRefusalsSayTheLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, service.DriverLocal, nil, nil, func(c *service.Config) { c.MaxFileSizeBytes = 64 << 10 })
	c := s.client(s.token("acme", "alice", nil))
	ctx := context.Background()

	big := bytes.Repeat([]byte("a,b\n"), (80<<10)/4)
	ct, body := multipartBody(t, map[string][]byte{"rows.csv": big})
	up, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, up.StatusCode(), "%s", up.Body)
	var p struct{ Rule, Detail string }
	require.NoError(t, json.Unmarshal(up.Body, &p))
	require.Equal(t, "size.too-large", p.Rule)
	require.Equal(t, "The file is larger than the limit of 64 KiB.", p.Detail)

	init, err := c.InitiateUploadWithResponse(ctx, nil, client.InitiateUploadJSONRequestBody{OriginalName: "rows.csv", ContentType: "text/csv", SizeBytes: int64(len(big)), Checksum: checksum(big)})
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, init.StatusCode(), "%s", init.Body)
	require.NoError(t, json.Unmarshal(init.Body, &p))
	require.Equal(t, "The file is larger than the limit of 64 KiB.", p.Detail)

	ct, body = multipartBody(t, map[string][]byte{"photo.exe": []byte("MZ")})
	up, err = c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(up.Body, &p))
	require.NotEmpty(t, p.Rule, "%s", up.Body)
	require.NotEmpty(t, p.Detail, "every rule has its words: %s", up.Body)
	require.NotContains(t, p.Detail, p.Rule, "words, not the identifier")
}
