package service

import (
	"context"
	"slices"

	"github.com/uploadedfile/uploadedfile/db"
)

// ErrQuotaExceeded means the upload would pass a storage quota; Rule names the
// limit (RuleQuotaTenantBytes, ...). Nothing was written or reserved.
var ErrQuotaExceeded = &Error{Code: "core.file.quota-exceeded"}

// The rules of ErrQuotaExceeded: which limit the upload would pass.
const (
	RuleQuotaTenantBytes = "quota.tenant-bytes"
	RuleQuotaTenantFiles = "quota.tenant-files"
	RuleQuotaOwnerBytes  = "quota.owner-bytes"
	RuleQuotaOwnerFiles  = "quota.owner-files"
)

// Usage is what a caller holds against the quotas, and what its tenant
// holds: bytes and files, and the limits that apply (0: unlimited).
type Usage struct {
	Owner, Tenant UsageOf
}

// UsageOf is one holder's usage and limits.
type UsageOf struct {
	Bytes, Files           int64
	BytesLimit, FilesLimit int64
}

// Usage returns the caller's usage and their tenant's, with the limits
// that apply. It reveals nothing of any other tenant or owner.
func (s *Service) Usage(ctx context.Context) (*Usage, error) {
	a, err := s.authorize(ctx, OpRead, nil, nil)
	if err != nil {
		return nil, err
	}
	rows, err := s.usageRows(ctx, a)
	if err != nil {
		return nil, s.internalError(ctx, ErrNotFound, "read usage", err)
	}
	u := &Usage{}
	for _, r := range rows {
		of := UsageOf{Bytes: r.Bytes, Files: r.Files, BytesLimit: r.BytesLimit, FilesLimit: r.FilesLimit}
		if r.UserID == "" {
			u.Tenant = of
		} else {
			u.Owner = of
		}
	}
	return u, nil
}

func (s *Service) usageRows(ctx context.Context, a access) ([]db.UsageReadRow, error) {
	return s.usageRowsOf(ctx, a.scope.TenantCode, a.scope.UserID)
}

// usageRowsOf reads the usage and limits of owner user in tenant and of
// the tenant (” first).
func (s *Service) usageRowsOf(ctx context.Context, tenant, user string) ([]db.UsageReadRow, error) {
	q := s.cfg.Quota
	return s.q.UsageRead(ctx, s.db, db.UsageReadParams{
		TenantCode: tenant, UserID: user,
		DefaultTenantBytes: q.TenantBytes, DefaultTenantFiles: q.TenantFiles, DefaultOwnerBytes: q.OwnerBytes, DefaultOwnerFiles: q.OwnerFiles,
	})
}

// quotaDefaults are the configured limits, as the inserts take them.
func (s *Service) quotaDefaults() (tenantBytes, tenantFiles, ownerBytes, ownerFiles int64) {
	q := s.cfg.Quota
	return q.TenantBytes, q.TenantFiles, q.OwnerBytes, q.OwnerFiles
}

// insertError maps an insert's failure: a reservation that did not fit is
// ErrQuotaExceeded with the limit it would pass; anything else is
// ErrUploadFailed (logged).
func (s *Service) insertError(ctx context.Context, a access, size int64, what string, err error) error {
	if !db.QuotaExceeded(err) {
		return s.internalError(ctx, ErrUploadFailed, what, err)
	}
	rule := RuleQuotaOwnerBytes
	if rows, rerr := s.usageRows(ctx, a); rerr == nil {
		rule = exceededRule(rows, size, 1)
	}
	s.log.InfoContext(ctx, "upload refused: quota", "rule", rule)
	return &ruleError{code: ErrQuotaExceeded, rule: rule}
}

// exceededRule names the first limit adding size bytes and files files
// would pass, tenant before owner, bytes before files.
func exceededRule(rows []db.UsageReadRow, size, files int64) string {
	for _, r := range rows { // '' (the tenant) sorts first
		prefix := "quota.owner-"
		if r.UserID == "" {
			prefix = "quota.tenant-"
		}
		if r.BytesLimit > 0 && r.Bytes+size > r.BytesLimit {
			return prefix + "bytes"
		}
		if r.FilesLimit > 0 && files > 0 && r.Files+files > r.FilesLimit {
			return prefix + "files"
		}
	}
	return RuleQuotaOwnerBytes // it fitted by the time we looked: name the likeliest
}

// QuotaOverride changes a tenant's limits (uploadedfile quota set): nil
// keeps the current override, -1 clears it back to the configured default,
// 0 is unlimited.
type QuotaOverride struct {
	TenantBytes, TenantFiles, OwnerBytes, OwnerFiles *int64
}

// TenantQuota is a tenant's overrides (nil: the configured default) and
// what it holds.
type TenantQuota struct {
	Tenant                                           string
	TenantBytes, TenantFiles, OwnerBytes, OwnerFiles *int64
	UsedBytes, UsedFiles                             int64
}

// UnsafeSystemSetQuota sets a tenant's limit overrides. A limit below a
// usage already held refuses new uploads; it never deletes anything.
// Trusted operators only.
func (s *Service) UnsafeSystemSetQuota(ctx context.Context, tenant string, o QuotaOverride) error {
	if !ValidScopeValue(tenant) {
		return ErrInvalidMeta
	}
	for _, v := range []*int64{o.TenantBytes, o.TenantFiles, o.OwnerBytes, o.OwnerFiles} {
		if v != nil && *v < -1 {
			return ErrInvalidMeta
		}
	}
	_, err := s.q.QuotaSet(ctx, s.db, db.QuotaSetParams{TenantCode: tenant, TenantBytes: o.TenantBytes, TenantFiles: o.TenantFiles, OwnerBytes: o.OwnerBytes, OwnerFiles: o.OwnerFiles})
	if err != nil {
		return s.internalError(ctx, ErrInvalidMeta, "set quota", err)
	}
	return nil
}

// UnsafeSystemQuotas lists the tenants with an override or a usage (one
// tenant when tenant is set), at most limit of them. Trusted operators
// only.
func (s *Service) UnsafeSystemQuotas(ctx context.Context, tenant string, limit int) ([]TenantQuota, error) {
	rows, err := s.q.QuotaList(ctx, s.db, db.QuotaListParams{Tenant: optional(tenant), Max: int32(max(1, min(limit, 10_000)))})
	if err != nil {
		return nil, s.internalError(ctx, ErrNotFound, "list quotas", err)
	}
	out := make([]TenantQuota, len(rows))
	for i, r := range rows {
		out[i] = TenantQuota{Tenant: deref(r.TenantCode), TenantBytes: r.TenantBytes, TenantFiles: r.TenantFiles, OwnerBytes: r.OwnerBytes,
			OwnerFiles: r.OwnerFiles, UsedBytes: r.UsedBytes, UsedFiles: r.UsedFiles}
	}
	return out, nil
}

// UnsafeSystemRecountUsage recomputes the usage of tenant (every tenant
// with a usage row when empty, a hundred at a time in byte order) from
// the rows, after manual changes, and returns how many usage rows it
// wrote. Each batch of tenants is recounted in a transaction of its own
// that first locks their usage rows: uploads and deletions of those
// tenants wait for the recount (they change the recounted usage after it)
// or committed before it (and are counted), so no upload is lost to the
// recount. Trusted operators only.
func (s *Service) UnsafeSystemRecountUsage(ctx context.Context, tenant string) (int64, error) {
	rep, err := s.UnsafeSystemRecount(ctx, RecountOptions{Tenant: tenant})
	return rep.Written, err
}

// RecountOptions choose and follow a recount (UnsafeSystemRecount).
type RecountOptions struct {
	// Tenant recounts one tenant; empty: every tenant with a usage row, in
	// byte order.
	Tenant string
	// After skips the tenants at or before it in byte order: where an
	// interrupted recount stopped (its report's Last).
	After string
	// Progress, when set, is told before the first tenant (0 done) and
	// after each batch how many are done of how many the run walks, and
	// the last one done (its checkpoint).
	Progress func(done, total int, last string)
}

// RecountReport is what a recount did.
type RecountReport struct {
	Tenants int    // tenants recounted
	Written int64  // usage rows written
	Last    string // the last tenant done ("" when none)
	// Interrupted: the caller's context ended before the last tenant; the
	// batch in flight was finished, and a run with After: Last goes on.
	Interrupted bool
}

// UnsafeSystemRecount is UnsafeSystemRecountUsage with its progress and a
// resumable walk: the tenants after o.After, a batch per transaction (as
// above), until they are done or ctx ends -- the batch in flight then
// finishes, and the report says where the run stopped. Trusted operators
// only.
func (s *Service) UnsafeSystemRecount(ctx context.Context, o RecountOptions) (RecountReport, error) {
	var rep RecountReport
	tenants := []string{o.Tenant}
	if o.Tenant == "" {
		var err error
		if tenants, err = s.q.UsageTenants(ctx, s.db); err != nil {
			return rep, s.internalError(ctx, ErrCleanupFailed, "list tenants to recount", err)
		}
	}
	if o.After != "" {
		tenants = slices.DeleteFunc(tenants, func(t string) bool { return t <= o.After })
	}
	if o.Progress != nil {
		o.Progress(0, len(tenants), o.After)
	}
	work := context.WithoutCancel(ctx) // a batch begun is finished: its transaction is one pass of the table
	for len(tenants) > 0 {
		if ctx.Err() != nil {
			rep.Interrupted = true
			return rep, nil
		}
		batch := tenants[:min(len(tenants), recountBatch)]
		tenants = tenants[len(batch):]
		n, err := s.recountTenants(work, batch)
		if err != nil {
			return rep, err
		}
		rep.Tenants += len(batch)
		rep.Written += n
		rep.Last = batch[len(batch)-1]
		if o.Progress != nil {
			o.Progress(rep.Tenants, rep.Tenants+len(tenants), rep.Last)
		}
	}
	return rep, nil
}

// recountBatch is how many tenants one recount transaction takes: the
// recount reads the table once per transaction (no index holds every row
// that holds space by tenant), and holds those tenants' usage rows -- their
// uploads and deletions wait -- for that one pass.
const recountBatch = 100

// recountTenants recounts tenants under their usage locks, in one
// transaction, and returns the usage rows it wrote.
func (s *Service) recountTenants(ctx context.Context, tenants []string) (int64, error) {
	var n int64
	err := s.inTx(ctx, nil, func(tx db.Tx) error {
		if _, err := s.q.UsageLockTenants(ctx, tx, tenants); err != nil {
			return s.internalError(ctx, ErrCleanupFailed, "lock usage", err, "tenants", len(tenants))
		}
		var err error
		if n, err = s.q.UsageRecount(ctx, tx, tenants); err != nil {
			return s.internalError(ctx, ErrCleanupFailed, "recount usage", err, "tenants", len(tenants))
		}
		return nil
	})
	return n, err
}
