package service

import (
	"context"
	"time"

	"github.com/uploadedfile/uploadedfile/db"
)

// ListScanBudget is how many of the scope's visible files one page of a
// tenant's or an owner's list reads at most: filters that match few of a
// large scope's files end a page early, with fewer files than its limit
// (none, at worst) and a cursor where the reading stopped, instead of
// reading the whole scope for one page. The files of one record are found
// through their own index and read whole.
const ListScanBudget = 1000

// listed is what a list's statement found: the rows that passed its
// filters, in order, one more than the page when another page follows;
// and spent, the last row read, when the scan budget ran out first.
type listed struct {
	rows  []db.UploadedFile
	spent *db.UploadedFile
}

// walked is the list's walk: the matching rows and the row the budget
// (ListScanBudget) ran out on.
func walked[R db.WalkRow](rows []R, err error) (listed, error) {
	return walkedWithin(ListScanBudget, rows, err)
}

// walkedWithin is walked for a walk of at most budget rows.
func walkedWithin[R db.WalkRow](budget int64, rows []R, err error) (listed, error) {
	if err != nil {
		return listed{}, err
	}
	matched, last := db.Walk(rows, budget)
	return listed{rows: matched, spent: last}, nil
}

// listRows runs the statement of the list's shape, for one row more than
// the page to know whether another page follows: the record's files when
// the filters name a record, the walk when they filter otherwise, else the
// scope's page.
func (s *Service) listRows(ctx context.Context, a access, f filter, at position) (listed, error) {
	o := f.opts
	switch {
	case o.Entity != "" && o.EntityID != "":
		rows, err := s.listRecordRows(ctx, a, f, at)
		return listed{rows: rows}, err
	case f.filtered():
		return s.listFilteredRows(ctx, a, f, at)
	}
	rows, err := s.listPageRows(ctx, a, f, at)
	return listed{rows: rows}, err
}

// filtered says whether any optional filter is set.
func (f filter) filtered() bool {
	o := f.opts
	return o.Module != "" || o.Entity != "" || o.EntityID != "" || f.contentType != nil || f.contentPrefix != nil ||
		f.visibility != nil || o.Temporary != nil || o.CreatedFrom != nil || o.CreatedBefore != nil || f.namePrefix != nil
}

// listPageRows runs the scope's page in the list's order, no optional
// filter set: the owner's, the department's (a tenant scope with one) or
// the tenant's.
func (s *Service) listPageRows(ctx context.Context, a access, f filter, at position) ([]db.UploadedFile, error) {
	sc, max, now := a.scope, int32(f.limit+1), s.now()
	switch {
	case a.owner:
		return s.ownerPage(ctx, f.sort, sc, at, now, max)
	case sc.DepartmentCode != nil:
		return s.departmentPage(ctx, f.sort, sc, at, now, max)
	case f.sort == SortName:
		return db.ListItems(s.q.FileListTenantByName(ctx, s.db, db.FileListTenantByNameParams{TenantCode: sc.TenantCode,
			Now: now, AfterName: at.Name, AfterID: at.ID, Max: max}))
	case f.sort == SortSize:
		return db.ListItems(s.q.FileListTenantBySize(ctx, s.db, db.FileListTenantBySizeParams{TenantCode: sc.TenantCode,
			Now: now, AfterSize: at.Size, AfterID: at.ID, Max: max}))
	default:
		return db.ListItems(s.q.FileListTenantByCreated(ctx, s.db, db.FileListTenantByCreatedParams{TenantCode: sc.TenantCode,
			Now: now, AfterCreated: at.Created, AfterID: at.ID, Max: max}))
	}
}

// ownerPage is the caller's own page in the order.
func (s *Service) ownerPage(ctx context.Context, sort ListSort, sc Scope, at position, now *time.Time, max int32) ([]db.UploadedFile, error) {
	switch sort {
	case SortName:
		return db.ListItems(s.q.FileListOwnerByName(ctx, s.db, db.FileListOwnerByNameParams{TenantCode: sc.TenantCode, UserID: sc.UserID,
			DepartmentCode: sc.DepartmentCode, Now: now, AfterName: at.Name, AfterID: at.ID, Max: max}))
	case SortSize:
		return db.ListItems(s.q.FileListOwnerBySize(ctx, s.db, db.FileListOwnerBySizeParams{TenantCode: sc.TenantCode, UserID: sc.UserID,
			DepartmentCode: sc.DepartmentCode, Now: now, AfterSize: at.Size, AfterID: at.ID, Max: max}))
	default:
		return db.ListItems(s.q.FileListOwnerByCreated(ctx, s.db, db.FileListOwnerByCreatedParams{TenantCode: sc.TenantCode, UserID: sc.UserID,
			DepartmentCode: sc.DepartmentCode, Now: now, AfterCreated: at.Created, AfterID: at.ID, Max: max}))
	}
}

// departmentPage is the page of the scope's department in the order.
func (s *Service) departmentPage(ctx context.Context, sort ListSort, sc Scope, at position, now *time.Time, max int32) ([]db.UploadedFile, error) {
	switch sort {
	case SortName:
		return db.ListItems(s.q.FileListDepartmentByName(ctx, s.db, db.FileListDepartmentByNameParams{TenantCode: sc.TenantCode,
			DepartmentCode: *sc.DepartmentCode, Now: now, AfterName: at.Name, AfterID: at.ID, Max: max}))
	case SortSize:
		return db.ListItems(s.q.FileListDepartmentBySize(ctx, s.db, db.FileListDepartmentBySizeParams{TenantCode: sc.TenantCode,
			DepartmentCode: *sc.DepartmentCode, Now: now, AfterSize: at.Size, AfterID: at.ID, Max: max}))
	default:
		return db.ListItems(s.q.FileListDepartmentByCreated(ctx, s.db, db.FileListDepartmentByCreatedParams{TenantCode: sc.TenantCode,
			DepartmentCode: *sc.DepartmentCode, Now: now, AfterCreated: at.Created, AfterID: at.ID, Max: max}))
	}
}

// walkFilters are the optional filters of a walk, as its statements take
// them.
type walkFilters struct {
	module, entity, entityID, contentType, contentPrefix, visibility, namePrefix *string
	temporary                                                                    *bool
	from, before                                                                 *time.Time
}

func walkFiltersOf(f filter) walkFilters {
	o := f.opts
	return walkFilters{
		module: optional(o.Module), entity: optional(o.Entity), entityID: optional(o.EntityID),
		contentType: f.contentType, contentPrefix: f.contentPrefix, visibility: f.visibility, namePrefix: f.namePrefix,
		temporary: o.Temporary, from: o.CreatedFrom, before: o.CreatedBefore,
	}
}

// listFilteredRows runs the walk of the list's scope and order: at most
// ListScanBudget of the scope's files read, those that pass the filters
// returned.
func (s *Service) listFilteredRows(ctx context.Context, a access, f filter, at position) (listed, error) {
	w, sc, max, now := walkFiltersOf(f), a.scope, int32(f.limit+1), s.now()
	switch {
	case a.owner:
		return s.ownerWalk(ctx, f.sort, sc, w, at, now, max)
	case sc.DepartmentCode != nil:
		return s.departmentWalk(ctx, f.sort, sc, w, at, now, max)
	}
	return s.tenantWalk(ctx, f.sort, sc, w, at, now, max)
}

// ownerWalk is the caller's own files' walk in the order.
func (s *Service) ownerWalk(ctx context.Context, sort ListSort, sc Scope, w walkFilters, at position, now *time.Time, max int32) (listed, error) {
	switch sort {
	case SortName:
		return walked(s.q.FileListOwnerByNameFiltered(ctx, s.db, db.FileListOwnerByNameFilteredParams{
			TenantCode: sc.TenantCode, UserID: sc.UserID, DepartmentCode: sc.DepartmentCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterName: at.Name, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	case SortSize:
		return walked(s.q.FileListOwnerBySizeFiltered(ctx, s.db, db.FileListOwnerBySizeFilteredParams{
			TenantCode: sc.TenantCode, UserID: sc.UserID, DepartmentCode: sc.DepartmentCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterSize: at.Size, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	default:
		return walked(s.q.FileListOwnerByCreatedFiltered(ctx, s.db, db.FileListOwnerByCreatedFilteredParams{
			TenantCode: sc.TenantCode, UserID: sc.UserID, DepartmentCode: sc.DepartmentCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterCreated: at.Created, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	}
}

// tenantWalk is the tenant's files' walk in the order (a scope without a
// department).
func (s *Service) tenantWalk(ctx context.Context, sort ListSort, sc Scope, w walkFilters, at position, now *time.Time, max int32) (listed, error) {
	switch sort {
	case SortName:
		return walked(s.q.FileListTenantByNameFiltered(ctx, s.db, db.FileListTenantByNameFilteredParams{
			TenantCode: sc.TenantCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterName: at.Name, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	case SortSize:
		return walked(s.q.FileListTenantBySizeFiltered(ctx, s.db, db.FileListTenantBySizeFilteredParams{
			TenantCode: sc.TenantCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterSize: at.Size, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	default:
		return walked(s.q.FileListTenantByCreatedFiltered(ctx, s.db, db.FileListTenantByCreatedFilteredParams{
			TenantCode: sc.TenantCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterCreated: at.Created, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	}
}

// departmentWalk is the walk of the scope's department's files in the
// order.
func (s *Service) departmentWalk(ctx context.Context, sort ListSort, sc Scope, w walkFilters, at position, now *time.Time, max int32) (listed, error) {
	switch sort {
	case SortName:
		return walked(s.q.FileListDepartmentByNameFiltered(ctx, s.db, db.FileListDepartmentByNameFilteredParams{
			TenantCode: sc.TenantCode, DepartmentCode: *sc.DepartmentCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterName: at.Name, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	case SortSize:
		return walked(s.q.FileListDepartmentBySizeFiltered(ctx, s.db, db.FileListDepartmentBySizeFilteredParams{
			TenantCode: sc.TenantCode, DepartmentCode: *sc.DepartmentCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterSize: at.Size, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	default:
		return walked(s.q.FileListDepartmentByCreatedFiltered(ctx, s.db, db.FileListDepartmentByCreatedFilteredParams{
			TenantCode: sc.TenantCode, DepartmentCode: *sc.DepartmentCode, Now: now, Module: w.module, Entity: w.entity,
			EntityID: w.entityID, ContentType: w.contentType, ContentTypePrefix: w.contentPrefix, Visibility: w.visibility,
			IsTemporary: w.temporary, CreatedFrom: w.from, CreatedBefore: w.before, NamePrefix: w.namePrefix,
			AfterCreated: at.Created, AfterID: at.ID, Scan: ListScanBudget, Max: max,
		}))
	}
}

// listRecordRows runs the record list of the sort: the files attached to
// one record, found through their own index whatever else the scope holds.
func (s *Service) listRecordRows(ctx context.Context, a access, f filter, at position) ([]db.UploadedFile, error) {
	o := f.opts
	p := db.FileListRecordByCreatedParams{
		TenantCode: a.scope.TenantCode, Entity: o.Entity, EntityID: o.EntityID, DepartmentCode: a.scope.DepartmentCode, Now: s.now(),
		Module: optional(o.Module), ContentType: f.contentType, ContentTypePrefix: f.contentPrefix, Visibility: f.visibility,
		IsTemporary: o.Temporary, CreatedFrom: o.CreatedFrom, CreatedBefore: o.CreatedBefore, NamePrefix: f.namePrefix,
		AfterCreated: at.Created, AfterID: at.ID, Max: int32(f.limit + 1),
	}
	if a.owner {
		p.UserID = &a.scope.UserID
	}
	switch f.sort {
	case SortName:
		return db.ListItems(s.q.FileListRecordByName(ctx, s.db, db.FileListRecordByNameParams{
			TenantCode: p.TenantCode, Entity: p.Entity, EntityID: p.EntityID, UserID: p.UserID, DepartmentCode: p.DepartmentCode, Now: p.Now,
			Module: p.Module, ContentType: p.ContentType, ContentTypePrefix: p.ContentTypePrefix, Visibility: p.Visibility,
			IsTemporary: p.IsTemporary, CreatedFrom: p.CreatedFrom, CreatedBefore: p.CreatedBefore, NamePrefix: p.NamePrefix,
			AfterName: at.Name, AfterID: at.ID, Max: p.Max,
		}))
	case SortSize:
		return db.ListItems(s.q.FileListRecordBySize(ctx, s.db, db.FileListRecordBySizeParams{
			TenantCode: p.TenantCode, Entity: p.Entity, EntityID: p.EntityID, UserID: p.UserID, DepartmentCode: p.DepartmentCode, Now: p.Now,
			Module: p.Module, ContentType: p.ContentType, ContentTypePrefix: p.ContentTypePrefix, Visibility: p.Visibility,
			IsTemporary: p.IsTemporary, CreatedFrom: p.CreatedFrom, CreatedBefore: p.CreatedBefore, NamePrefix: p.NamePrefix,
			AfterSize: at.Size, AfterID: at.ID, Max: p.Max,
		}))
	default:
		return db.ListItems(s.q.FileListRecordByCreated(ctx, s.db, p))
	}
}
