package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/remote"
)

// Fetcher fetches a remote URL for CloneFromURL; by default the SSRF-safe
// internal/remote fetcher built from Config.RemoteClone.
type Fetcher interface {
	Fetch(ctx context.Context, rawURL string) (*remote.Response, error)
}

// WithFetcher replaces the remote fetcher (tests).
func WithFetcher(f Fetcher) Option { return func(s *Service) { s.fetcher = f } }

func (s *Service) defaultFetcher() Fetcher {
	rc := s.cfg.RemoteClone
	return remote.New(remote.Config{
		Timeout: rc.Timeout, MaxBytes: s.cfg.remoteCloneMaxBytes, MaxRedirects: s.cfg.remoteRedirects,
		AllowedHosts: rc.AllowedHosts, AllowedPorts: rc.AllowedPorts,
	})
}

// CloneFromURL downloads url and stores it like a buffer upload (the same
// checks, the same hidden-row lifecycle), returning the entity with its
// extra data typed as T. It is refused with ErrRemoteDisabled unless
// remoteClone.enabled; any fetch problem is ErrRemoteFetchFailed, with the
// detail (which names internal network facts) only in the log. fileName
// overrides the name the response or the URL suggests.
func CloneFromURL[T any](ctx context.Context, s *Service, url, fileName string, meta *Meta, extraData T) (*File[T], error) {
	if !s.cfg.RemoteClone.Enabled {
		return nil, ErrRemoteDisabled
	}
	if _, err := s.authorize(ctx, OpClone, nil, nil); err != nil {
		return nil, err
	}
	resp, err := s.fetcher.Fetch(ctx, url)
	if err != nil {
		s.log.InfoContext(ctx, "remote fetch refused or failed", "error", err.Error())
		return nil, ErrRemoteFetchFailed
	}
	defer resp.Body.Close()
	name := fileName
	if name == "" {
		name = resp.FileName
	}
	declared := ""
	if _, ok := filecheck.CanonicalMIME(resp.ContentType); ok {
		declared = resp.ContentType
	}
	body := &fetchBody{r: resp.Body}
	row, err := s.upload(ctx, bufferUpload{op: OpClone, src: body, name: name, declared: declared, maxSize: s.cfg.remoteCloneMaxBytes, meta: meta, extra: extraData})
	if body.err != nil {
		s.log.InfoContext(ctx, "remote body failed", "error", body.err.Error())
		return nil, ErrRemoteFetchFailed
	}
	if err != nil {
		return nil, err
	}
	var extra T
	if err := json.Unmarshal(row.ExtraData, &extra); err != nil {
		return nil, ErrInvalidMeta
	}
	return fileFromRow(row, extra), nil
}

// fetchBody remembers a failure of the remote body (too large, timed out),
// which is a fetch failure rather than a storage one.
type fetchBody struct {
	r   io.Reader
	err error
}

func (b *fetchBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}
