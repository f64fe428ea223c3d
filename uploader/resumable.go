package uploader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/gen/client"
)

// DefaultChunkSize is the size of a resumable upload's chunks unless
// ResumableFile says otherwise: what a lost connection costs at most.
const DefaultChunkSize = 5 << 20

// ResumableFile is what ResumableUpload sends.
type ResumableFile struct {
	// Name is the original name; its extension must match ContentType.
	Name        string
	ContentType string
	// Body is read at the offsets the server asks for; Size is its length.
	Body io.ReaderAt
	Size int64
	// Temporary: private, expiring 24 hours after it is ready.
	Temporary bool
	// ChunkSize is the most one request carries (default DefaultChunkSize).
	ChunkSize int64
	// URL is the upload's URL from an earlier attempt (OnCreated gave it):
	// the upload goes on from the server's offset instead of starting again.
	URL string
	// OnCreated, when set, is called with the upload's URL once it exists:
	// keep it to resume after the process itself stopped.
	OnCreated func(url string)
}

// ResumableUpload sends f over the server's resumable upload route (the tus
// protocol): the upload is created (or, with f.URL, found again), then its
// bytes go in chunks, each with its SHA-256. After a failure that can pass
// -- a dropped connection, a 5xx, another request still writing, an offset
// that moved -- the client asks the server for its offset and sends from
// there, so a lost connection costs at most one chunk. The chunk that ends
// the file completes it; the ready file is returned.
func (c *Client) ResumableUpload(ctx context.Context, f ResumableFile) (*client.UploadedFile, error) {
	chunk := f.ChunkSize
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	url := f.URL
	if url == "" {
		created, err := c.createResumable(ctx, f)
		if err != nil {
			return nil, err
		}
		url = created
		if f.OnCreated != nil {
			f.OnCreated(url)
		}
	}
	var offset int64
	err := c.retry(ctx, func() (int, []byte, http.Header, error) {
		resp, body, err := c.tus(ctx, http.MethodHead, url, nil, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			return status(resp), body, header(resp), err
		}
		offset, err = strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
		return resp.StatusCode, nil, resp.Header, err
	})
	if err != nil {
		return nil, err
	}
	for offset < f.Size {
		next, err := c.sendChunk(ctx, url, f, offset, min(chunk, f.Size-offset))
		if err != nil {
			return nil, err
		}
		offset = next
	}
	id, err := uuid.Parse(url[strings.LastIndex(url, "/")+1:])
	if err != nil {
		return nil, fmt.Errorf("uploader: the upload's URL names no file: %w", err)
	}
	return c.Get(ctx, id)
}

// createResumable creates the upload and returns its URL.
func (c *Client) createResumable(ctx context.Context, f ResumableFile) (string, error) {
	meta := []string{"filename " + base64.StdEncoding.EncodeToString([]byte(f.Name)), "filetype " + base64.StdEncoding.EncodeToString([]byte(f.ContentType))}
	if f.Temporary {
		meta = append(meta, "temporary "+base64.StdEncoding.EncodeToString([]byte("true")))
	}
	h := map[string]string{"Upload-Length": strconv.FormatInt(f.Size, 10), "Upload-Metadata": strings.Join(meta, ",")}
	var url string
	err := c.retry(ctx, func() (int, []byte, http.Header, error) {
		resp, body, err := c.tus(ctx, http.MethodPost, strings.TrimSuffix(c.base, "/")+"/uploaded-file/tus/", h, nil)
		if err == nil && resp.StatusCode == http.StatusCreated {
			url = resp.Header.Get("Location")
		}
		return status(resp), body, header(resp), err
	})
	return url, err
}

// sendChunk sends the n bytes of f at offset and returns the server's
// offset after it: after a failure that can pass, the offset the server
// reports (what it kept), so the caller goes on from there.
func (c *Client) sendChunk(ctx context.Context, url string, f ResumableFile, offset, n int64) (int64, error) {
	buf := make([]byte, n)
	if _, err := f.Body.ReadAt(buf, offset); err != nil && err != io.EOF {
		return 0, fmt.Errorf("uploader: read the body: %w", err)
	}
	sum := sha256.Sum256(buf)
	h := map[string]string{
		"Content-Type":    "application/offset+octet-stream",
		"Upload-Offset":   strconv.FormatInt(offset, 10),
		"Upload-Checksum": "sha256 " + base64.StdEncoding.EncodeToString(sum[:]),
	}
	next := offset
	err := c.retry(ctx, func() (int, []byte, http.Header, error) {
		resp, body, err := c.tus(ctx, http.MethodPatch, url, h, buf)
		if err == nil && resp.StatusCode == http.StatusNoContent {
			next, err = strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
			return resp.StatusCode, nil, resp.Header, err
		}
		// Whatever happened, the server may have kept more than this
		// chunk's start (its answer was lost) or less: ask it.
		if head, _, herr := c.tus(ctx, http.MethodHead, url, nil, nil); herr == nil && head.StatusCode == http.StatusOK {
			if got, perr := strconv.ParseInt(head.Header.Get("Upload-Offset"), 10, 64); perr == nil && got != offset {
				next = got
				return http.StatusNoContent, nil, head.Header, nil
			}
		}
		st := status(resp)
		if st == http.StatusLocked {
			st = http.StatusServiceUnavailable // another request still writes: wait and try again
		}
		return st, body, header(resp), err
	})
	return next, err
}

// tus sends one request of the protocol with the caller's token.
func (c *Client) tus(ctx context.Context, method, url string, h map[string]string, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	tok, err := c.token(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("uploader: token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Tus-Resumable", "1.0.0")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp, b, err
}

func status(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

func header(resp *http.Response) http.Header {
	if resp == nil {
		return http.Header{}
	}
	return resp.Header
}
