package httpapi

// The host routes (/host/...): the trusted backend's calls, in the same
// Server.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	api "github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/service"
)

// HostUpload implements api.StrictServerInterface.
func (s *Server) HostUpload(ctx context.Context, req api.HostUploadRequestObject) (api.HostUploadResponseObject, error) {
	form, err := readForm(req.Body, []string{"temporary", "visibility", "legacy", "module", "entity", "entityId", "type", "extraData"})
	if err != nil {
		return nil, err
	}
	res, err := s.hostUpload(ctx, form)
	if err := form.check(err); err != nil {
		return nil, err
	}
	return api.HostUpload201JSONResponse{Body: res, Headers: api.HostUpload201ResponseHeaders{Location: hostFileLocation(res.Id)}}, nil
}

func (s *Server) hostUpload(ctx context.Context, f *form) (api.HostFile, error) {
	temporary, legacy := f.fields["temporary"] == "true", f.fields["legacy"] == "true"
	opts := &service.UploadOptions{ContentType: f.fileType, Visibility: service.Visibility(f.fields["visibility"])}
	switch {
	case legacy && temporary:
		// The legacy temporary upload: private, expiring, no provenance.
		if opts.Visibility != "" || f.fields["module"]+f.fields["entity"]+f.fields["entityId"]+f.fields["type"]+f.fields["extraData"] != "" {
			return api.HostFile{}, service.ErrInvalidMeta
		}
		tmp, err := s.svc.UploadTemporaryLegacy(ctx, f.file, f.fileName, &service.UploadOptions{ContentType: f.fileType})
		if err != nil {
			return api.HostFile{}, err
		}
		r, err := s.svc.ResultOf(ctx, tmp.File)
		if err != nil {
			return api.HostFile{}, err
		}
		return hostFile(r), nil
	case legacy:
		var extra map[string]any
		if raw := f.fields["extraData"]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &extra); err != nil {
				return api.HostFile{}, service.ErrInvalidMeta
			}
		}
		meta := &service.Meta{Module: f.fields["module"], Entity: f.fields["entity"], EntityID: f.fields["entityId"], Type: f.fields["type"]}
		file, err := s.svc.UploadLegacy(ctx, f.file, f.fileName, meta, extra, opts)
		if err != nil {
			return api.HostFile{}, err
		}
		r, err := s.svc.ResultOf(ctx, file)
		if err != nil {
			return api.HostFile{}, err
		}
		return hostFile(r), nil
	case temporary:
		// Legacy or not, the host gets the whole file, key and cdn included.
		if opts.Visibility != "" {
			return api.HostFile{}, service.ErrInvalidMeta
		}
		r, err := s.svc.UploadTemporary(ctx, f.file, f.fileName, &service.TemporaryUploadOptions{ContentType: f.fileType})
		if err != nil {
			return api.HostFile{}, err
		}
		return hostFile(r), nil
	default:
		r, err := s.svc.Upload(ctx, f.file, f.fileName, opts)
		if err != nil {
			return api.HostFile{}, err
		}
		return hostFile(r), nil
	}
}

// HostCloneFromUrl implements api.StrictServerInterface.
func (s *Server) HostCloneFromUrl(ctx context.Context, req api.HostCloneFromUrlRequestObject) (api.HostCloneFromUrlResponseObject, error) {
	b := req.Body
	meta := &service.Meta{Module: deref(b.Module), Entity: deref(b.Entity), EntityID: deref(b.EntityId), Type: deref(b.Type)}
	var extra json.RawMessage
	if b.ExtraData != nil {
		raw, err := json.Marshal(*b.ExtraData)
		if err != nil {
			return nil, service.ErrInvalidMeta
		}
		extra = raw
	}
	f, err := service.CloneFromURL(ctx, s.svc, b.Url, deref(b.FileName), meta, extra)
	if err != nil {
		return nil, err
	}
	r, err := s.svc.ResultOf(ctx, f)
	if err != nil {
		return nil, err
	}
	res := hostFile(r)
	return api.HostCloneFromUrl201JSONResponse{Body: res, Headers: api.HostCloneFromUrl201ResponseHeaders{Location: hostFileLocation(res.Id)}}, nil
}

// HostListFiles implements api.StrictServerInterface: ListFiles with the
// host's view of each file.
func (s *Server) HostListFiles(ctx context.Context, req api.HostListFilesRequestObject) (api.HostListFilesResponseObject, error) {
	p, err := s.svc.List(ctx, listOptions(api.ListFilesParams(req.Params)))
	if err != nil {
		return nil, err
	}
	out := api.HostFileList{Items: make([]api.HostFile, len(p.Files)), NextCursor: optionalString(p.NextCursor)}
	for i, f := range p.Files {
		out.Items[i] = hostFile(f)
	}
	return api.HostListFiles200JSONResponse(out), nil
}

// HostGetFile implements api.StrictServerInterface.
func (s *Server) HostGetFile(ctx context.Context, req api.HostGetFileRequestObject) (api.HostGetFileResponseObject, error) {
	r, err := s.svc.Find(ctx, req.Id.String())
	if err != nil {
		return nil, err
	}
	return api.HostGetFile200JSONResponse(hostFile(r)), nil
}

// HostResolveUrl implements api.StrictServerInterface.
func (s *Server) HostResolveUrl(ctx context.Context, req api.HostResolveUrlRequestObject) (api.HostResolveUrlResponseObject, error) {
	u, err := s.svc.ResolveURL(ctx, req.Id.String())
	if err != nil {
		return nil, err
	}
	return api.HostResolveUrl200JSONResponse{Url: u.URL, UrlExpiredAt: u.URLExpiredAt}, nil
}

// HostSetExtraData implements api.StrictServerInterface.
func (s *Server) HostSetExtraData(ctx context.Context, req api.HostSetExtraDataRequestObject) (api.HostSetExtraDataResponseObject, error) {
	if err := service.SetExtraData(ctx, s.svc, req.Id.String(), map[string]any(*req.Body)); err != nil {
		return nil, err
	}
	return api.HostSetExtraData204Response{}, nil
}

// HostDownloadAttached implements api.StrictServerInterface.
func (s *Server) HostDownloadAttached(ctx context.Context, req api.HostDownloadAttachedRequestObject) (api.HostDownloadAttachedResponseObject, error) {
	p := req.Params
	d, err := s.svc.DownloadAttached(ctx, req.Id.String(), service.Attachment{Module: p.Module, Entity: p.Entity, EntityID: p.EntityId})
	if err != nil {
		return nil, err
	}
	return bytesResponse{ctx: ctx, d: d}, nil
}

// HostMarkUsed implements api.StrictServerInterface.
func (s *Server) HostMarkUsed(ctx context.Context, req api.HostMarkUsedRequestObject) (api.HostMarkUsedResponseObject, error) {
	b := req.Body
	meta := &service.Meta{Module: deref(b.Module), Entity: deref(b.Entity), EntityID: deref(b.EntityId), Type: deref(b.Type)}
	if err := s.svc.MarkUsed(ctx, b.Ids, meta, nil); err != nil {
		return nil, err
	}
	return api.HostMarkUsed204Response{}, nil
}

// HostUseFiles implements api.StrictServerInterface.
func (s *Server) HostUseFiles(ctx context.Context, req api.HostUseFilesRequestObject) (api.HostUseFilesResponseObject, error) {
	b := req.Body
	if err := s.svc.UseFiles(ctx, b.References, deref(b.Entity), deref(b.EntityId)); err != nil {
		return nil, err
	}
	return api.HostUseFiles204Response{}, nil
}

// HostChangeFiles implements api.StrictServerInterface.
func (s *Server) HostChangeFiles(ctx context.Context, req api.HostChangeFilesRequestObject) (api.HostChangeFilesResponseObject, error) {
	b := req.Body
	if err := s.svc.ChangeFiles(ctx, b.Olds, b.News, deref(b.Entity), deref(b.EntityId)); err != nil {
		return nil, err
	}
	return api.HostChangeFiles204Response{}, nil
}

// HostDelete implements api.StrictServerInterface.
func (s *Server) HostDelete(ctx context.Context, req api.HostDeleteRequestObject) (api.HostDeleteResponseObject, error) {
	if err := s.svc.Delete(ctx, req.Body.References); err != nil {
		return nil, err
	}
	return api.HostDelete204Response{}, nil
}

// httpResult is UploadedFileHttpResult: the result without key and cdn.
func httpResult(r *service.Result) api.UploadedFile {
	return api.UploadedFile{
		Id: r.ID, OriginalName: r.OriginalName, SizeBytes: r.SizeBytes, ContentType: r.ContentType,
		Visibility: api.Visibility(r.Visibility), Status: api.Status(r.Status), IsTemporary: r.IsTemporary,
		Disposition: api.Disposition(r.Disposition), Checksum: r.Checksum, Module: r.Module, Entity: r.Entity,
		EntityId: r.EntityID, Type: r.Type, CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt, ExpiredAt: r.ExpiredAt,
		Url: optionalString(r.URL), UrlExpiredAt: r.URLExpiredAt, Width: dimension(r.Width), Height: dimension(r.Height),
	}
}

// dimension is an image dimension as the API types hold it.
func dimension(n *int32) *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}

// hostFile is the host's view: the HTTP result plus extra data and the
// storage references.
func hostFile(r *service.Result) api.HostFile {
	h := httpResult(r)
	var extra map[string]any
	_ = json.Unmarshal(r.ExtraData, &extra)
	return api.HostFile{
		Id: h.Id, OriginalName: h.OriginalName, SizeBytes: h.SizeBytes, ContentType: h.ContentType,
		Visibility: h.Visibility, Status: h.Status, IsTemporary: h.IsTemporary, Disposition: h.Disposition,
		Checksum: h.Checksum, Module: h.Module, Entity: h.Entity, EntityId: h.EntityId, Type: h.Type,
		CreatedAt: h.CreatedAt, CompletedAt: h.CompletedAt, ExpiredAt: h.ExpiredAt, Url: h.Url, UrlExpiredAt: h.UrlExpiredAt,
		Width: h.Width, Height: h.Height, Key: r.Key, Cdn: r.CDN, ExtraData: &extra,
	}
}

func initiateResult(r *service.InitiateResult) api.InitiatedUpload {
	return api.InitiatedUpload{
		Id:     r.ID,
		Upload: api.UploadTarget{Method: r.Upload.Method, Url: r.Upload.URL, Headers: r.Upload.Headers, ExpiresAt: r.Upload.ExpiresAt},
		File:   httpResult(r.File),
	}
}

// queryOf is r's query (none without a request).
func queryOf(r *http.Request) url.Values {
	if r == nil {
		return nil
	}
	return r.URL.Query()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
