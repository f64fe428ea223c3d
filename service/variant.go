package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
	"github.com/uploadedfile/uploadedfile/internal/objectkey"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// VariantsConfig configures image variants: named presets, generated on
// first request (or eagerly after file.ready) and stored beside the
// original. Only configured presets exist; clients cannot ask for sizes.
type VariantsConfig struct {
	// Presets by name (lowercase letters, digits, '-', '_'; at most 64).
	Presets map[string]VariantPreset `koanf:"presets"`
	// MaxPixels: images declaring more are refused before decoding
	// (default 40 MP).
	MaxPixels int64 `koanf:"maxPixels"`
	// Concurrency: generations decoding at once in this process (default
	// 2); with MaxPixels it bounds the memory decoding takes.
	Concurrency int `koanf:"concurrency"`
	// Timeout bounds one generation (default 30 s, at most 2 minutes).
	Timeout time.Duration `koanf:"timeout"`
	// Engine names the image engine: "go" (every build) or "vips" (a
	// binary built with -tags vips and libvips). Empty: the first of
	// imagevariant.Engines(), vips when it is built in.
	Engine string `koanf:"engine"`
}

// VariantPreset is one named preset.
type VariantPreset struct {
	Width  int `koanf:"width"`
	Height int `koanf:"height"`
	// Fit: cover, contain or inside.
	Fit string `koanf:"fit"`
	// Format: jpeg, png, webp (lossless on the go engine, lossy at
	// Quality on vips) or avif (vips only).
	Format string `koanf:"format"`
	// Quality: 1..100 (0: 82), of JPEG, and of WebP and AVIF on vips.
	Quality int `koanf:"quality"`
	// Eager: generated after file.ready by the events relay, not on the
	// first request.
	Eager bool `koanf:"eager"`
}

// spec is the generator's form of p.
func (p VariantPreset) spec() imagevariant.Spec {
	return imagevariant.Spec{Width: p.Width, Height: p.Height, Fit: imagevariant.Fit(p.Fit), Format: imagevariant.Format(p.Format), Quality: p.Quality}
}

// Variant is a generated image variant with a URL to read it.
type Variant struct {
	FileID       uuid.UUID
	Preset       string
	ContentType  string
	SizeBytes    int64
	Width        int
	Height       int
	CreatedAt    time.Time
	URL          string
	URLExpiredAt *time.Time
}

// ErrVariantRefused means the file is an image this service will not make a
// variant of; Rule says why (RuleVariantTooManyPixels, ...). HTTP 422.
var ErrVariantRefused = &Error{Code: "core.file.variant-refused"}

// ErrVariantFailed means generating or storing the variant failed, or another
// request is still generating it; retryable. HTTP 503.
var ErrVariantFailed = &Error{Code: "core.file.variant-failed"}

// The rules of ErrVariantRefused.
const (
	RuleVariantTooManyPixels = "variant.too-many-pixels"
	RuleVariantAnimated      = "variant.animated"
	RuleVariantUndecodable   = "variant.undecodable"
)

const (
	// variantLease bounds a generation or a variant deletion; a lease that
	// elapsed is taken over (generation) or swept (deletion). It is well
	// over the longest generation (Timeout, at most 2 minutes), so a live
	// generator never loses its row.
	variantLease = 5 * time.Minute
	// variantPoll is how often a request waiting for another's generation
	// looks again.
	variantPoll = 25 * time.Millisecond
)

var presetName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// resolveVariants validates the presets and applies the defaults.
func (r *resolved) resolveVariants() error {
	v := &r.Variants
	engine, err := variantEngine(v.Engine)
	if err != nil {
		return err
	}
	r.variantEngine = engine
	for name, p := range v.Presets {
		if !presetName.MatchString(name) {
			return configError("variants.presets", "%q: a name is lowercase letters, digits, '-' and '_' (at most 64)", name)
		}
		if err := p.spec().Validate(); err != nil {
			return configError("variants.presets."+name, "%v", err)
		}
		if !imagevariant.Writes(engine, imagevariant.Format(p.Format)) {
			return configError("variants.presets."+name, "format %s: the %s engine does not write it (avif needs the vips engine: a binary built with -tags vips)", p.Format, engine.Name())
		}
	}
	if v.MaxPixels < 0 || v.Concurrency < 0 || v.Timeout < 0 || v.Timeout > 2*time.Minute {
		return configError("variants", "maxPixels and concurrency are positive (0: default); timeout is at most 2m")
	}
	if v.MaxPixels == 0 {
		v.MaxPixels = imagevariant.DefaultMaxPixels
	}
	if v.Concurrency == 0 {
		v.Concurrency = 2
	}
	if v.Timeout == 0 {
		v.Timeout = 30 * time.Second
	}
	for name, p := range v.Presets {
		if p.Eager {
			r.eagerPresets = append(r.eagerPresets, name)
		}
	}
	slices.Sort(r.eagerPresets)
	return nil
}

// ImageEngine names the engine variants are made on and its library's
// version: "vips libvips 8.14.1", "go x/image v0.47.0".
func (s *Service) ImageEngine() string { return imagevariant.Describe(s.imager.Engine()) }

// variantEngine is the engine called name ("": the preferred one built in).
func variantEngine(name string) (imagevariant.Engine, error) {
	if name == "" {
		return imagevariant.Engines()[0], nil
	}
	if e, ok := imagevariant.EngineNamed(name); ok {
		return e, nil
	}
	var built []string
	for _, e := range imagevariant.Engines() {
		built = append(built, e.Name())
	}
	return nil, configError("variants.engine", "%q is not built into this binary (it has: %s); the vips engine needs libvips and `go build -tags vips`", name, strings.Join(built, ", "))
}

// variantSource reports a content type variants are made from.
func variantSource(contentType string) bool {
	switch contentType {
	case filecheck.TypePNG, filecheck.TypeJPEG, filecheck.TypeGIF, filecheck.TypeWebP:
		return true
	}
	return false
}

// FindVariant returns the variant of a visible image for a configured
// preset, with a URL to read it, generating it on the first request (two
// concurrent first requests generate it once). An unknown preset is
// ErrInvalidMeta; a missing, out-of-scope or non-image file is
// ErrNotFound, identically; an image refused for its size or frames is
// ErrVariantRefused; a generation that fails or outlives the timeout is
// ErrVariantFailed (retryable).
func (s *Service) FindVariant(ctx context.Context, id, preset string) (*Variant, error) {
	uid, a, p, err := s.authorizeVariant(ctx, OpRead, id, preset)
	if err != nil {
		return nil, err
	}
	file, v, err := s.variantOf(ctx, uid, a, preset, p)
	if err != nil {
		return nil, err
	}
	u, err := s.variantURL(ctx, file.UploadedFile, v, file.DBNow)
	if err != nil {
		return nil, err
	}
	return &Variant{
		FileID: file.UploadedFile.ID, Preset: v.Preset, ContentType: v.ContentType, SizeBytes: deref(v.SizeBytes),
		Width: int(deref(v.Width)), Height: int(deref(v.Height)), CreatedAt: v.CreatedAt, URL: u.URL, URLExpiredAt: u.URLExpiredAt,
	}, nil
}

// DownloadVariant returns a variant's bytes, as FindVariant finds it. A
// stored variant is read with the few columns its response needs; one not
// ready yet is made as FindVariant makes it.
func (s *Service) DownloadVariant(ctx context.Context, id, preset string) (*Download, error) {
	uid, a, p, err := s.authorizeVariant(ctx, OpDownload, id, preset)
	if err != nil {
		return nil, err
	}
	row, err := s.q.VariantGetDownload(ctx, s.db, db.VariantGetDownloadParams{
		ID: uid, Preset: preset, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(), Now: s.now(),
	})
	if err := s.imageLookupError(ctx, err, row.Expired, row.ContentType); err != nil {
		return nil, err
	}
	v := db.UploadedFileVariant{Preset: preset}
	if row.VariantKey != nil {
		v.Key, v.ContentType = *row.VariantKey, *row.VariantContentType
	} else if _, v, err = s.variantOf(ctx, uid, a, preset, p); err != nil {
		return nil, err
	}
	return s.openObject(ctx, row.ID, objectRef{key: v.Key, name: variantName(row.OriginalName, v), contentType: v.ContentType}, row.Disposition)
}

// authorizeVariant checks that preset is configured (ErrInvalidMeta) and
// authorizes op on id.
func (s *Service) authorizeVariant(ctx context.Context, op Operation, id, preset string) (uuid.UUID, access, VariantPreset, error) {
	p, ok := s.cfg.Variants.Presets[preset]
	if !ok {
		return uuid.UUID{}, access{}, VariantPreset{}, ErrInvalidMeta
	}
	uid, a, err := s.authorizeID(ctx, op, id)
	return uid, a, p, err
}

// imageLookupError answers a lookup of a visible image: readError's
// answer, or ErrNotFound (as for a missing one) for a file variants are
// not made from; nil for an image to make variants of.
func (s *Service) imageLookupError(ctx context.Context, err error, expired bool, contentType string) error {
	if err := s.readError(ctx, err, expired); err != nil {
		return err
	}
	if !variantSource(contentType) {
		return ErrNotFound
	}
	return nil
}

// variantOf returns the ready variant for preset of the visible image uid,
// which a has authorized -- read with the file in one round trip when
// stored, generated (or waited for) otherwise.
func (s *Service) variantOf(ctx context.Context, uid uuid.UUID, a access, preset string, p VariantPreset) (db.FileGetVisibleRow, db.UploadedFileVariant, error) {
	row, err := s.q.VariantGetVisible(ctx, s.db, db.VariantGetVisibleParams{
		ID: uid, Preset: preset, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(), Now: s.now(),
	})
	if err := s.imageLookupError(ctx, err, row.Expired, row.UploadedFile.ContentType); err != nil {
		return db.FileGetVisibleRow{}, db.UploadedFileVariant{}, err
	}
	file := db.FileGetVisibleRow{UploadedFile: row.UploadedFile, Expired: row.Expired, DBNow: row.DBNow}
	if row.VariantKey != nil {
		return file, db.UploadedFileVariant{
			ID: *row.VariantID, FileID: uid, Preset: preset, Key: *row.VariantKey, Status: "ready", ContentType: *row.VariantContentType,
			Width: row.VariantWidth, Height: row.VariantHeight, SizeBytes: row.VariantSizeBytes, CreatedAt: *row.VariantCreatedAt,
		}, nil
	}
	v, err := s.ensureVariant(ctx, file.UploadedFile, preset, p)
	return file, v, err
}

// ensureVariant returns the ready variant of file for preset: the stored
// one, the one another request finishes meanwhile, or one generated here
// under a claim. Bounded by the variants timeout.
func (s *Service) ensureVariant(ctx context.Context, file db.UploadedFile, preset string, p VariantPreset) (db.UploadedFileVariant, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Variants.Timeout)
	defer cancel()
	for {
		// Claim first: the caller found no ready variant, and the claim
		// itself refuses a live generation, a ready or a deleting row.
		claimed, err := s.claimVariant(ctx, file, preset, p)
		switch {
		case err == nil:
			return s.generateVariant(ctx, file, claimed, p)
		case !isNoRows(err):
			return db.UploadedFileVariant{}, s.variantError(ctx, "claim variant", err, file.ID)
		}
		v, err := s.q.VariantGet(ctx, s.db, db.VariantGetParams{FileID: file.ID, Preset: preset})
		switch {
		case err == nil && v.Status == "ready":
			return v, nil
		case err == nil && v.Status == "deleting":
			return db.UploadedFileVariant{}, ErrNotFound // the file is being deleted
		case err != nil && !isNoRows(err):
			return db.UploadedFileVariant{}, s.variantError(ctx, "read variant", err, file.ID)
		}
		// Another request holds a live generation (or the file went away
		// between the claim and the read): wait and try again.
		select {
		case <-ctx.Done():
			return db.UploadedFileVariant{}, s.variantError(ctx, "wait for variant", ctx.Err(), file.ID)
		case <-time.After(variantPoll):
		}
	}
}

// claimVariant inserts the generating row, with the key its object will
// be written at (beside the original, under the same visibility prefix).
func (s *Service) claimVariant(ctx context.Context, file db.UploadedFile, preset string, p VariantPreset) (db.UploadedFileVariant, error) {
	id := newTimeOrderedID()
	key, err := objectkey.Key{
		Folder: keyFolder(file.Key, s.cfg.Folder), Tenant: file.TenantCode, Department: file.DepartmentCode, ID: id,
		Ext: imagevariant.Format(p.Format).Ext(), Public: isPublic(file),
	}.String()
	if err != nil {
		return db.UploadedFileVariant{}, err
	}
	return s.q.VariantClaim(ctx, s.db, db.VariantClaimParams{
		ID: id, FileID: file.ID, Preset: preset, Key: key, ContentType: imagevariant.Format(p.Format).ContentType(),
		Lease: variantLease, Now: s.now(),
	})
}

// keyFolder is the folder of the original's key (so a variant sits beside
// it even after the configured folder changed), or folder when the key is
// not one objectkey built (legacy rows).
func keyFolder(key, folder string) string {
	if k, err := objectkey.Parse(key); err == nil {
		return k.Folder
	}
	return folder
}

// generateVariant makes the variant this worker claimed (v), writes its
// object and finishes the row. On any failure the object is deleted and
// the row dropped while the claim is still this worker's; a worker that
// dies leaves both to the sweep once the lease elapses.
func (s *Service) generateVariant(ctx context.Context, file db.UploadedFile, v db.UploadedFileVariant, p VariantPreset) (db.UploadedFileVariant, error) {
	claim := *v.LeaseUntil
	// The generator's slots bound the originals held in memory as well as
	// their decode: at most variants.concurrency at once, not one per
	// waiting request.
	var readErr error
	res, err := s.imager.GenerateFrom(ctx, func(ctx context.Context) ([]byte, error) {
		src, err := s.readObject(ctx, file.Key, file.SizeBytes)
		readErr = err
		return src, err
	}, p.spec())
	if readErr != nil {
		s.dropVariant(ctx, v, claim, false)
		return db.UploadedFileVariant{}, s.variantError(ctx, "read original", readErr, file.ID)
	}
	if err != nil {
		s.dropVariant(ctx, v, claim, false)
		if rule := refusedRule(err); rule != "" {
			s.log.InfoContext(ctx, "variant refused", "file_id", file.ID, "preset", v.Preset, "rule", rule)
			return db.UploadedFileVariant{}, &ruleError{code: ErrVariantRefused, rule: rule}
		}
		return db.UploadedFileVariant{}, s.variantError(ctx, "generate variant", err, file.ID)
	}
	if err := s.putVariant(ctx, v.Key, res, isPublic(file)); err != nil {
		s.dropVariant(ctx, v, claim, true)
		return db.UploadedFileVariant{}, s.variantError(ctx, "store variant", err, file.ID)
	}
	done, err := s.q.VariantFinish(ctx, s.db, db.VariantFinishParams{
		ID: v.ID, FileID: file.ID, Claim: claim, SizeBytes: int64(len(res.Data)), Width: int32(res.Width), Height: int32(res.Height),
		DefaultTenantBytes: s.cfg.Quota.TenantBytes, DefaultOwnerBytes: s.cfg.Quota.OwnerBytes, Now: s.now(),
	})
	switch {
	case err == nil:
		return db.UploadedFileVariant(done), nil
	case db.QuotaExceeded(err):
		s.dropVariant(ctx, v, claim, true)
		rule := RuleQuotaOwnerBytes
		if rows, rerr := s.usageRowsOf(ctx, file.TenantCode, file.UserID); rerr == nil {
			rule = exceededRule(rows, int64(len(res.Data)), 0) // a variant adds bytes, no file
		}
		return db.UploadedFileVariant{}, &ruleError{code: ErrQuotaExceeded, rule: rule}
	case isNoRows(err):
		// The file went away meanwhile (or, past the lease, the row was
		// taken over: dropVariant leaves a row that is not ours alone).
		s.dropVariant(ctx, v, claim, true)
		return db.UploadedFileVariant{}, ErrNotFound
	default:
		s.dropVariant(ctx, v, claim, true)
		return db.UploadedFileVariant{}, s.variantError(ctx, "finish variant", err, file.ID)
	}
}

// readObject reads a whole object of the expected size (never more).
func (s *Service) readObject(ctx context.Context, key string, size int64) ([]byte, error) {
	body, err := s.store.Open(ctx, key, nil)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := io.Copy(buf, io.LimitReader(body, size+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) != size {
		return nil, fmt.Errorf("object holds %d bytes, the row says %d", buf.Len(), size)
	}
	return buf.Bytes(), nil
}

// putVariant writes the variant object. A taken-over generation finds the
// first generator's object at the same key: it is replaced.
func (s *Service) putVariant(ctx context.Context, key string, res imagevariant.Result, public bool) error {
	opts := storage.PutOptions{ContentType: res.ContentType, Size: int64(len(res.Data)), Public: public}
	_, err := s.store.Put(ctx, key, bytes.NewReader(res.Data), opts)
	if errors.Is(err, storage.ErrExists) {
		if err = s.store.Delete(ctx, key); err == nil {
			_, err = s.store.Put(ctx, key, bytes.NewReader(res.Data), opts)
		}
	}
	return err
}

// dropVariant undoes a claim this worker could not finish: the object (if
// one may have been written) is deleted, then the row, both only while the
// row still carries this worker's claim and well inside its lease, so a
// worker that took the row over never loses its object. Whatever is left
// is the sweep's once the lease elapses.
func (s *Service) dropVariant(ctx context.Context, v db.UploadedFileVariant, claim time.Time, written bool) {
	cctx, cancel := detached(ctx)
	defer cancel()
	cur, err := s.q.VariantGet(cctx, s.db, db.VariantGetParams{FileID: v.FileID, Preset: v.Preset})
	if err != nil || cur.ID != v.ID || cur.Status != "generating" || cur.LeaseUntil == nil || !cur.LeaseUntil.Equal(claim) {
		return
	}
	if claim.Sub(s.clock()) < variantLease/2 {
		return // too close to the lease: the sweep deletes it
	}
	if written {
		if err := s.store.Delete(cctx, v.Key); err != nil {
			s.log.WarnContext(cctx, "delete variant object failed; left to the sweep", "file_id", v.FileID, "error", err.Error())
			return
		}
	}
	if _, err := s.q.VariantDrop(cctx, s.db, db.VariantDropParams{ID: v.ID, Claim: claim}); err != nil && !isNoRows(err) {
		s.log.ErrorContext(cctx, "drop variant", "file_id", v.FileID, "error", err.Error())
	}
}

// refusedRule names the rule of a refused image, or "".
func refusedRule(err error) string {
	switch {
	case errors.Is(err, imagevariant.ErrTooManyPixels):
		return RuleVariantTooManyPixels
	case errors.Is(err, imagevariant.ErrAnimated):
		return RuleVariantAnimated
	case errors.Is(err, imagevariant.ErrUnsupported):
		return RuleVariantUndecodable
	}
	return ""
}

// variantError logs err and returns ErrVariantFailed.
func (s *Service) variantError(ctx context.Context, what string, err error, fileID uuid.UUID) error {
	return s.internalError(ctx, ErrVariantFailed, what, err, "file_id", fileID)
}

// variantURL is urlFor for a variant object.
func (s *Service) variantURL(ctx context.Context, file db.UploadedFile, v db.UploadedFileVariant, now time.Time) (*URL, error) {
	route := s.fileRoute(file.ID, "variants/"+v.Preset+"/download")
	return s.objectURL(ctx, file, objectRef{key: v.Key, route: route, name: variantName(file.OriginalName, v), contentType: v.ContentType, preset: v.Preset}, now)
}

// variantName is the file name a variant is served under:
// <original stem>-<preset>.<ext>.
func variantName(original string, v db.UploadedFileVariant) string {
	stem := original
	if i := strings.LastIndexByte(stem, '.'); i > 0 {
		stem = stem[:i]
	}
	return stem + "-" + v.Preset + path.Ext(v.Key) // the key carries the format's extension
}

// deleteVariants deletes the variants of a file whose deletion this worker
// holds, each through its own claim; false when one could not be deleted
// (the file's claim is then released, and the retry comes back here).
func (s *Service) deleteVariants(ctx context.Context, row db.UploadedFile) bool {
	if !variantSource(row.ContentType) {
		return true
	}
	vs, err := s.q.VariantClaimForFile(ctx, s.db, db.VariantClaimForFileParams{FileID: row.ID, Lease: variantLease, Now: s.now()})
	if err != nil {
		s.log.ErrorContext(ctx, "claim variants", "file_id", row.ID, "error", err.Error())
		return false
	}
	ok := true
	for _, v := range vs {
		ok = s.finishVariantDeletion(ctx, v) && ok
	}
	return ok
}

// finishVariantDeletion deletes a claimed variant's object and settles
// the row, or releases the claim one minute ahead when the delete fails.
func (s *Service) finishVariantDeletion(ctx context.Context, v db.UploadedFileVariant) bool {
	claim := *v.LeaseUntil
	if err := s.store.Delete(ctx, v.Key); err != nil {
		s.log.WarnContext(ctx, "delete variant object failed; released for retry", "file_id", v.FileID, "error", err.Error())
		if _, err := s.q.VariantRelease(ctx, s.db, db.VariantReleaseParams{ID: v.ID, Claim: claim, Backoff: DeletionRetryBackoff, Now: s.now()}); err != nil && !isNoRows(err) {
			s.log.ErrorContext(ctx, "release variant claim", "file_id", v.FileID, "error", err.Error())
		}
		return false
	}
	_, err := s.q.VariantSettle(ctx, s.db, db.VariantSettleParams{ID: v.ID, Claim: claim})
	if err != nil && !isNoRows(err) {
		s.log.ErrorContext(ctx, "settle variant deletion", "file_id", v.FileID, "error", err.Error())
		return false
	}
	return true
}

// sweepVariants deletes up to max variants whose lease elapsed (their
// generator or deleter died, or a delete failed); it reports how many it
// finished and claimed.
func (s *Service) sweepVariants(ctx context.Context, max int) (done, claimed int, err error) {
	vs, err := s.q.VariantClaimElapsed(ctx, s.db, db.VariantClaimElapsedParams{Max: int32(max), Lease: variantLease, Now: s.now()})
	if err != nil {
		return 0, 0, s.internalError(ctx, ErrCleanupFailed, "claim elapsed variants", err)
	}
	for _, v := range vs {
		if s.finishVariantDeletion(ctx, v) {
			done++
		}
	}
	recordSweep(ctx, len(vs), done)
	return done, len(vs), nil
}

// EagerVariantPresets lists the presets generated after file.ready
// (eager: true), in name order.
func (s *Service) EagerVariantPresets() []string { return slices.Clone(s.cfg.eagerPresets) }

// UnsafeSystemGenerateEagerVariants generates the eager presets of file id
// of tenant, off the upload's request path (the events relay calls it for
// file.ready). A file that is gone or not an image, and an image the
// presets refuse, are done (nil); a failure is returned so the caller
// retries. Cross-tenant; trusted background code only.
func (s *Service) UnsafeSystemGenerateEagerVariants(ctx context.Context, tenant string, id uuid.UUID) error {
	eager := s.cfg.eagerPresets
	if len(eager) == 0 {
		return nil
	}
	file, err := s.q.FileGetVisible(ctx, s.db, db.FileGetVisibleParams{ID: id, TenantCode: tenant, Now: s.now()})
	switch {
	case isNoRows(err):
		return nil
	case err != nil:
		return s.variantError(ctx, "eager variants: read file", err, id)
	case file.Expired || !variantSource(file.UploadedFile.ContentType):
		return nil
	}
	for _, name := range eager {
		_, err := s.ensureVariant(ctx, file.UploadedFile, name, s.cfg.Variants.Presets[name])
		if err != nil && !errors.Is(err, ErrVariantRefused) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrQuotaExceeded) {
			return err
		}
	}
	return nil
}
