package httpapi

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"

	api "github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/servecontent"
	"github.com/uploadedfile/uploadedfile/service"
)

// Healthz implements api.StrictServerInterface: the process answers.
func (s *Server) Healthz(context.Context, api.HealthzRequestObject) (api.HealthzResponseObject, error) {
	return api.Healthz200TextResponse("ok\n"), nil
}

// Readyz implements api.StrictServerInterface: every dependency answers.
func (s *Server) Readyz(ctx context.Context, _ api.ReadyzRequestObject) (api.ReadyzResponseObject, error) {
	msg, ok := s.health.check(ctx)
	if !ok {
		return api.Readyz503TextResponse(msg), nil
	}
	return api.Readyz200TextResponse(msg), nil
}

// InitiateUpload implements api.StrictServerInterface: an end user's direct
// upload is always private (a public one is HostInitiateUpload's).
func (s *Server) InitiateUpload(ctx context.Context, req api.InitiateUploadRequestObject) (api.InitiateUploadResponseObject, error) {
	b := req.Body
	r, err := s.initiate(ctx, service.InitiateInput{OriginalName: b.OriginalName, ContentType: b.ContentType, SizeBytes: b.SizeBytes, Checksum: b.Checksum},
		ptr(api.Private), b.Disposition)
	if err != nil {
		return nil, err
	}
	return api.InitiateUpload201JSONResponse{Body: r, Headers: api.InitiateUpload201ResponseHeaders{Location: fileLocation(r.Id)}}, nil
}

// HostInitiateUpload implements api.StrictServerInterface: a host backend
// starts a direct upload for the acting user and chooses its visibility.
func (s *Server) HostInitiateUpload(ctx context.Context, req api.HostInitiateUploadRequestObject) (api.HostInitiateUploadResponseObject, error) {
	b := req.Body
	r, err := s.initiate(ctx, service.InitiateInput{OriginalName: b.OriginalName, ContentType: b.ContentType, SizeBytes: b.SizeBytes, Checksum: b.Checksum},
		b.Visibility, b.Disposition)
	if err != nil {
		return nil, err
	}
	return api.HostInitiateUpload201JSONResponse{Body: r, Headers: api.HostInitiateUpload201ResponseHeaders{Location: hostFileLocation(r.Id)}}, nil
}

// initiate starts a direct upload with the optional visibility and
// disposition (nil: the configured defaults).
func (s *Server) initiate(ctx context.Context, in service.InitiateInput, vis *api.Visibility, disp *api.Disposition) (api.InitiatedUpload, error) {
	opts := &service.UploadOptions{}
	if vis != nil {
		opts.Visibility = service.Visibility(*vis)
	}
	if disp != nil {
		opts.Disposition = service.Disposition(*disp)
	}
	r, err := s.svc.InitiateUpload(ctx, in, opts)
	if err != nil {
		return api.InitiatedUpload{}, err
	}
	return initiateResult(r), nil
}

func ptr[T any](v T) *T { return &v }

// InitiateTemporaryUpload implements api.StrictServerInterface.
func (s *Server) InitiateTemporaryUpload(ctx context.Context, req api.InitiateTemporaryUploadRequestObject) (api.InitiateTemporaryUploadResponseObject, error) {
	b := req.Body
	opts := &service.TemporaryUploadOptions{}
	if b.Disposition != nil {
		opts.Disposition = service.Disposition(*b.Disposition)
	}
	r, err := s.svc.InitiateTemporaryUpload(ctx, service.InitiateInput{OriginalName: b.OriginalName, ContentType: b.ContentType, SizeBytes: b.SizeBytes, Checksum: b.Checksum}, opts)
	if err != nil {
		return nil, err
	}
	res := initiateResult(r)
	return api.InitiateTemporaryUpload201JSONResponse{Body: res, Headers: api.InitiateTemporaryUpload201ResponseHeaders{Location: fileLocation(res.Id)}}, nil
}

// CompleteUpload implements api.StrictServerInterface.
func (s *Server) CompleteUpload(ctx context.Context, req api.CompleteUploadRequestObject) (api.CompleteUploadResponseObject, error) {
	r, err := s.svc.CompleteUpload(ctx, req.Id.String())
	if err != nil {
		return nil, err
	}
	return fileJSON{status: http.StatusOK, file: httpResult(r)}, nil
}

// PutUploadContent implements api.StrictServerInterface: a signed local
// upload target (no token: the guard let it through) or the caller's own
// authenticated write; either answers with the object's ETag.
func (s *Server) PutUploadContent(ctx context.Context, req api.PutUploadContentRequestObject) (api.PutUploadContentResponseObject, error) {
	var rc *service.ContentReceipt
	var err error
	r := requestOf(ctx)
	if q := queryOf(r); service.IsSigned(q) {
		rc, err = s.svc.WriteSignedContent(ctx, req.Id.String(), service.SignedContent{
			Query: q, ContentType: r.Header.Get("Content-Type"), ContentLength: r.ContentLength,
			Checksum: r.Header.Get(service.ChecksumHeader),
		}, req.Body)
	} else {
		rc, err = s.svc.WriteUploadContent(ctx, req.Id.String(), req.Body)
	}
	if err != nil {
		return nil, err
	}
	return api.PutUploadContent200JSONResponse{Body: httpResult(rc.File), Headers: api.PutUploadContent200ResponseHeaders{ETag: &rc.ETag}}, nil
}

// GetFile implements api.StrictServerInterface.
func (s *Server) GetFile(ctx context.Context, req api.GetFileRequestObject) (api.GetFileResponseObject, error) {
	r, err := s.svc.Find(ctx, req.Id.String())
	if err != nil {
		return nil, err
	}
	return fileJSON{status: http.StatusOK, file: httpResult(r)}, nil
}

// ListFiles implements api.StrictServerInterface: one page of the files the
// caller may see, each without its URL unless withUrls.
func (s *Server) ListFiles(ctx context.Context, req api.ListFilesRequestObject) (api.ListFilesResponseObject, error) {
	p, err := s.svc.List(ctx, listOptions(req.Params))
	if err != nil {
		return nil, err
	}
	out := api.FileList{Items: make([]api.UploadedFile, len(p.Files)), NextCursor: optionalString(p.NextCursor)}
	for i, f := range p.Files {
		out.Items[i] = httpResult(f)
	}
	return fileListJSON{list: out}, nil
}

// listOptions maps the list's query parameters (the host route has the
// same ones) onto service.ListOptions.
func listOptions(q api.ListFilesParams) service.ListOptions {
	o := service.ListOptions{
		Module: deref(q.Module), Entity: deref(q.Entity), EntityID: deref(q.EntityId), ContentType: deref(q.ContentType),
		Temporary: q.Temporary, CreatedFrom: q.CreatedFrom, CreatedBefore: q.CreatedBefore, NamePrefix: deref(q.NamePrefix),
		Cursor: deref(q.Cursor), WithURLs: q.WithUrls != nil && *q.WithUrls,
	}
	if q.Limit != nil {
		o.Limit = *q.Limit
		if o.Limit == 0 {
			o.Limit = -1 // limit=0 is asked for, not absent: refused
		}
	}
	if q.Sort != nil {
		o.Sort = service.ListSort(*q.Sort)
	}
	if q.Visibility != nil {
		o.Visibility = service.Visibility(*q.Visibility)
	}
	return o
}

// GetUsage implements api.StrictServerInterface.
func (s *Server) GetUsage(ctx context.Context, _ api.GetUsageRequestObject) (api.GetUsageResponseObject, error) {
	u, err := s.svc.Usage(ctx)
	if err != nil {
		return nil, err
	}
	return api.GetUsage200JSONResponse(usageOf(u)), nil
}

// HostGetUsage implements api.StrictServerInterface.
func (s *Server) HostGetUsage(ctx context.Context, _ api.HostGetUsageRequestObject) (api.HostGetUsageResponseObject, error) {
	u, err := s.svc.Usage(ctx)
	if err != nil {
		return nil, err
	}
	return api.HostGetUsage200JSONResponse(usageOf(u)), nil
}

func usageOf(u *service.Usage) api.Usage {
	of := func(x service.UsageOf) api.UsageOf {
		return api.UsageOf{Bytes: x.Bytes, Files: x.Files, BytesLimit: x.BytesLimit, FilesLimit: x.FilesLimit}
	}
	return api.Usage{Owner: of(u.Owner), Tenant: of(u.Tenant)}
}

// DeleteFile implements api.StrictServerInterface.
func (s *Server) DeleteFile(ctx context.Context, req api.DeleteFileRequestObject) (api.DeleteFileResponseObject, error) {
	if err := s.svc.DeleteByID(ctx, req.Id.String()); err != nil {
		return nil, err
	}
	return api.DeleteFile204Response{}, nil
}

// UploadFile implements api.StrictServerInterface: the deprecated
// multipart route, one file, streamed.
func (s *Server) UploadFile(ctx context.Context, req api.UploadFileRequestObject) (api.UploadFileResponseObject, error) {
	form, err := readForm(req.Body, nil)
	if err != nil {
		return nil, err
	}
	r, err := s.svc.Upload(ctx, form.file, form.fileName, &service.UploadOptions{ContentType: form.fileType})
	if err := form.check(err); err != nil {
		return nil, err
	}
	file := httpResult(r)
	return fileJSON{status: http.StatusCreated, file: file, location: fileLocation(file.Id)}, nil
}

// GetFileVariant implements api.StrictServerInterface: an image variant for
// a configured preset, generated on first request.
func (s *Server) GetFileVariant(ctx context.Context, req api.GetFileVariantRequestObject) (api.GetFileVariantResponseObject, error) {
	v, err := s.svc.FindVariant(ctx, req.Id.String(), req.Preset)
	if err != nil {
		return nil, err
	}
	return api.GetFileVariant200JSONResponse(httpVariant(v)), nil
}

// HostGetFileVariant implements api.StrictServerInterface.
func (s *Server) HostGetFileVariant(ctx context.Context, req api.HostGetFileVariantRequestObject) (api.HostGetFileVariantResponseObject, error) {
	v, err := s.svc.FindVariant(ctx, req.Id.String(), req.Preset)
	if err != nil {
		return nil, err
	}
	return api.HostGetFileVariant200JSONResponse(httpVariant(v)), nil
}

// DownloadFileVariant implements api.StrictServerInterface.
func (s *Server) DownloadFileVariant(ctx context.Context, req api.DownloadFileVariantRequestObject) (api.DownloadFileVariantResponseObject, error) {
	d, err := s.svc.DownloadVariant(ctx, req.Id.String(), req.Preset)
	if err != nil {
		return nil, err
	}
	return bytesResponse{ctx: ctx, d: d}, nil
}

func httpVariant(v *service.Variant) api.FileVariant {
	return api.FileVariant{
		FileId: v.FileID, Preset: v.Preset, ContentType: api.FileVariantContentType(v.ContentType), SizeBytes: v.SizeBytes,
		Width: v.Width, Height: v.Height, CreatedAt: v.CreatedAt, Url: v.URL, UrlExpiredAt: v.URLExpiredAt,
	}
}

// DownloadFile implements api.StrictServerInterface.
func (s *Server) DownloadFile(ctx context.Context, req api.DownloadFileRequestObject) (api.DownloadFileResponseObject, error) {
	d, err := s.svc.Download(ctx, req.Id.String())
	if err != nil {
		return nil, err
	}
	return bytesResponse{ctx: ctx, d: d}, nil
}

// bytesResponse serves a download: the allowlisted type, the sandbox
// headers (servecontent), the file's disposition (attachment unless it was
// stored inline) with an RFC 6266 filename*, the ETag, and -- when
// the body can seek -- Range and conditional requests (http.ServeContent).
type bytesResponse struct {
	ctx context.Context
	d   *service.Download
	// granted: a signed URL's answer, which other origins may embed
	// (Cross-Origin-Resource-Policy cross-origin, as a presigned GET).
	granted bool
}

func (b bytesResponse) visit(w http.ResponseWriter) error {
	defer b.d.Body.Close()
	h := w.Header()
	ct := filecheck.ContentTypeOf(b.d.FileName)
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	// As an S3 presigned URL answers: the file's own disposition (inline
	// or attachment). The sandbox keeps what a browser renders out of this
	// origin.
	disp := filecheck.Disposition(b.d.FileName, b.d.Disposition == service.DispositionInline)
	servecontent.DownloadHeaders(h, disp, b.d.ETag, b.granted)
	r := requestOf(b.ctx)
	if r != nil && servecontent.CheckRanges(r.Header.Get("Range"), b.d.Size) != nil {
		servecontent.RefuseRanges(w, b.d.Size)
		return nil
	}
	rs, ok := b.d.Body.(io.ReadSeeker)
	if f, isFile := b.d.Body.(*os.File); isFile {
		// A stored file's size is known (the store read it from the same
		// descriptor): sizedFile spares ServeContent's two seeks to learn it.
		rs = newSizedFile(f, b.d.Size)
	}
	if ok && r != nil {
		http.ServeContent(w, r, "", b.d.LastModified, rs)
		return nil
	}
	h.Set("Content-Length", strconv.FormatInt(b.d.Size, 10))
	w.WriteHeader(http.StatusOK)
	_, err := io.Copy(w, b.d.Body)
	return err
}

// VisitDownloadFileVariantResponse implements api.DownloadFileVariantResponseObject.
func (b bytesResponse) VisitDownloadFileVariantResponse(w http.ResponseWriter) error {
	return b.visit(w)
}

// VisitDownloadFileResponse implements api.DownloadFileResponseObject.
func (b bytesResponse) VisitDownloadFileResponse(w http.ResponseWriter) error { return b.visit(w) }

// VisitHostDownloadAttachedResponse implements api.HostDownloadAttachedResponseObject.
func (b bytesResponse) VisitHostDownloadAttachedResponse(w http.ResponseWriter) error {
	return b.visit(w)
}
