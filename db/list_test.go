package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// listFilters is every optional filter of the list queries.
type listFilters struct {
	dept, module, entity, entityID, contentType, contentPrefix, visibility, namePrefix *string
	temporary                                                                          *bool
	from, before                                                                       *time.Time
}

// filtered says whether f sets an optional filter (the department is the
// scope's).
func (f listFilters) filtered() bool {
	return f.module != nil || f.entity != nil || f.entityID != nil || f.contentType != nil || f.contentPrefix != nil ||
		f.visibility != nil || f.namePrefix != nil || f.temporary != nil || f.from != nil || f.before != nil
}

// scopeShape is the shape that serves shape with f as the service picks
// it: a tenant's list with a department is the department's.
func scopeShape(shape string, f listFilters) string {
	if f.dept != nil && strings.HasPrefix(shape, "Tenant") {
		return "Department" + strings.TrimPrefix(shape, "Tenant")
	}
	return shape
}

// listQuery is the name of the statement listCall runs for shape and f.
func listQuery(shape string, f listFilters) string {
	shape = scopeShape(shape, f)
	if f.filtered() && !strings.HasPrefix(shape, "Record") {
		return "FileList" + shape + "Filtered"
	}
	return "FileList" + shape
}

// listCall runs the list query of one shape (Owner|Tenant + By
// Created|Name|Size) with f, from the first page, on conn: the page with
// no optional filter, the walk with any.
func listCall(ctx context.Context, q *db.Queries, conn db.DBTX, shape string, f listFilters, tenant, user string) ([]db.UploadedFile, error) {
	shape = scopeShape(shape, f)
	if !f.filtered() && !strings.HasPrefix(shape, "Record") {
		return pageCall(ctx, q, conn, shape, f.dept, tenant, user)
	}
	now := at(0)
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	switch shape {
	case "OwnerByCreated":
		return matchedRows(q.FileListOwnerByCreatedFiltered(ctx, conn, db.FileListOwnerByCreatedFilteredParams{TenantCode: tenant, UserID: user, DepartmentCode: f.dept, Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterCreated: far, AfterID: uuid.Max, Scan: listScan, Max: 51}))
	case "OwnerByName":
		return matchedRows(q.FileListOwnerByNameFiltered(ctx, conn, db.FileListOwnerByNameFilteredParams{TenantCode: tenant, UserID: user, DepartmentCode: f.dept, Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterName: "", AfterID: uuid.Nil, Scan: listScan, Max: 51}))
	case "OwnerBySize":
		return matchedRows(q.FileListOwnerBySizeFiltered(ctx, conn, db.FileListOwnerBySizeFilteredParams{TenantCode: tenant, UserID: user, DepartmentCode: f.dept, Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterSize: 1 << 62, AfterID: uuid.Max, Scan: listScan, Max: 51}))
	case "TenantByCreated":
		return matchedRows(q.FileListTenantByCreatedFiltered(ctx, conn, db.FileListTenantByCreatedFilteredParams{TenantCode: tenant, Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterCreated: far, AfterID: uuid.Max, Scan: listScan, Max: 51}))
	case "TenantByName":
		return matchedRows(q.FileListTenantByNameFiltered(ctx, conn, db.FileListTenantByNameFilteredParams{TenantCode: tenant, Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterName: "", AfterID: uuid.Nil, Scan: listScan, Max: 51}))
	case "TenantBySize":
		return matchedRows(q.FileListTenantBySizeFiltered(ctx, conn, db.FileListTenantBySizeFilteredParams{TenantCode: tenant, Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterSize: 1 << 62, AfterID: uuid.Max, Scan: listScan, Max: 51}))
	case "DepartmentByCreated":
		return matchedRows(q.FileListDepartmentByCreatedFiltered(ctx, conn, db.FileListDepartmentByCreatedFilteredParams{TenantCode: tenant, DepartmentCode: deptOf(f), Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterCreated: far, AfterID: uuid.Max, Scan: listScan, Max: 51}))
	case "DepartmentByName":
		return matchedRows(q.FileListDepartmentByNameFiltered(ctx, conn, db.FileListDepartmentByNameFilteredParams{TenantCode: tenant, DepartmentCode: deptOf(f), Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterName: "", AfterID: uuid.Nil, Scan: listScan, Max: 51}))
	case "DepartmentBySize":
		return matchedRows(q.FileListDepartmentBySizeFiltered(ctx, conn, db.FileListDepartmentBySizeFilteredParams{TenantCode: tenant, DepartmentCode: deptOf(f), Now: now,
			Module: f.module, Entity: f.entity, EntityID: f.entityID, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
			Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
			AfterSize: 1 << 62, AfterID: uuid.Max, Scan: listScan, Max: 51}))
	}
	return recordCall(ctx, q, conn, shape, f, tenant, user)
}

// listScan is the scan budget of a page in these tests.
const listScan = 1000

// rowsRead is how many rows a plan's scans of uploaded_file read: the rows
// each returned and those its filter removed, over all its loops.
func rowsRead(v any) float64 {
	var n float64
	switch x := v.(type) {
	case []any:
		for _, c := range x {
			n += rowsRead(c)
		}
	case map[string]any:
		if x["Relation Name"] == "uploaded_file" {
			rows, _ := x["Actual Rows"].(float64)
			removed, _ := x["Rows Removed by Filter"].(float64)
			loops, _ := x["Actual Loops"].(float64)
			n += (rows + removed) * max(loops, 1)
		}
		for _, c := range x {
			n += rowsRead(c)
		}
	}
	return n
}

// pageCall runs the page of one shape with no optional filter.
func pageCall(ctx context.Context, q *db.Queries, conn db.DBTX, shape string, dept *string, tenant, user string) ([]db.UploadedFile, error) {
	now, far := at(0), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	switch shape {
	case "OwnerByCreated":
		return db.ListItems(q.FileListOwnerByCreated(ctx, conn, db.FileListOwnerByCreatedParams{TenantCode: tenant, UserID: user, DepartmentCode: dept, Now: now,
			AfterCreated: far, AfterID: uuid.Max, Max: 51}))
	case "OwnerByName":
		return db.ListItems(q.FileListOwnerByName(ctx, conn, db.FileListOwnerByNameParams{TenantCode: tenant, UserID: user, DepartmentCode: dept, Now: now,
			AfterName: "", AfterID: uuid.Nil, Max: 51}))
	case "OwnerBySize":
		return db.ListItems(q.FileListOwnerBySize(ctx, conn, db.FileListOwnerBySizeParams{TenantCode: tenant, UserID: user, DepartmentCode: dept, Now: now,
			AfterSize: 1 << 62, AfterID: uuid.Max, Max: 51}))
	case "TenantByCreated":
		return db.ListItems(q.FileListTenantByCreated(ctx, conn, db.FileListTenantByCreatedParams{TenantCode: tenant, Now: now,
			AfterCreated: far, AfterID: uuid.Max, Max: 51}))
	case "TenantByName":
		return db.ListItems(q.FileListTenantByName(ctx, conn, db.FileListTenantByNameParams{TenantCode: tenant, Now: now,
			AfterName: "", AfterID: uuid.Nil, Max: 51}))
	case "TenantBySize":
		return db.ListItems(q.FileListTenantBySize(ctx, conn, db.FileListTenantBySizeParams{TenantCode: tenant, Now: now,
			AfterSize: 1 << 62, AfterID: uuid.Max, Max: 51}))
	case "DepartmentByCreated":
		return db.ListItems(q.FileListDepartmentByCreated(ctx, conn, db.FileListDepartmentByCreatedParams{TenantCode: tenant, DepartmentCode: deptOf(listFilters{dept: dept}), Now: now,
			AfterCreated: far, AfterID: uuid.Max, Max: 51}))
	case "DepartmentByName":
		return db.ListItems(q.FileListDepartmentByName(ctx, conn, db.FileListDepartmentByNameParams{TenantCode: tenant, DepartmentCode: deptOf(listFilters{dept: dept}), Now: now,
			AfterName: "", AfterID: uuid.Nil, Max: 51}))
	case "DepartmentBySize":
		return db.ListItems(q.FileListDepartmentBySize(ctx, conn, db.FileListDepartmentBySizeParams{TenantCode: tenant, DepartmentCode: deptOf(listFilters{dept: dept}), Now: now,
			AfterSize: 1 << 62, AfterID: uuid.Max, Max: 51}))
	}
	return nil, fmt.Errorf("no list shape %q", shape)
}

// deptOf is the department a department's list is asked for: f's, else
// dept-1.
func deptOf(f listFilters) string {
	if f.dept == nil {
		return "dept-1"
	}
	return *f.dept
}

// matchedRows are the files of a walk that passed its filters.
func matchedRows[R db.WalkRow](rows []R, err error) ([]db.UploadedFile, error) {
	matched, _ := db.Walk(rows, listScan)
	return matched, err
}

// recordCall runs the record list of one shape (RecordBy Created|Name|Size)
// with f, whose entity and entity id name the record; user "" is the
// tenant's list.
func recordCall(ctx context.Context, q *db.Queries, conn db.DBTX, shape string, f listFilters, tenant, user string) ([]db.UploadedFile, error) {
	p := db.FileListRecordByCreatedParams{TenantCode: tenant, DepartmentCode: f.dept, Now: at(0),
		Module: f.module, ContentType: f.contentType, ContentTypePrefix: f.contentPrefix,
		Visibility: f.visibility, IsTemporary: f.temporary, CreatedFrom: f.from, CreatedBefore: f.before, NamePrefix: f.namePrefix,
		AfterCreated: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), AfterID: uuid.Max, Max: 51}
	if f.entity == nil || f.entityID == nil {
		return nil, fmt.Errorf("no list shape %q without a record", shape)
	}
	p.Entity, p.EntityID = *f.entity, *f.entityID
	if user != "" {
		p.UserID = &user
	}
	switch shape {
	case "RecordByCreated":
		return db.ListItems(q.FileListRecordByCreated(ctx, conn, p))
	case "RecordByName":
		return db.ListItems(q.FileListRecordByName(ctx, conn, db.FileListRecordByNameParams{TenantCode: p.TenantCode, Entity: p.Entity, EntityID: p.EntityID,
			UserID: p.UserID, DepartmentCode: p.DepartmentCode, Now: p.Now, Module: p.Module, ContentType: p.ContentType,
			ContentTypePrefix: p.ContentTypePrefix, Visibility: p.Visibility, IsTemporary: p.IsTemporary, CreatedFrom: p.CreatedFrom,
			CreatedBefore: p.CreatedBefore, NamePrefix: p.NamePrefix, AfterName: "", AfterID: uuid.Nil, Max: p.Max}))
	case "RecordBySize":
		return db.ListItems(q.FileListRecordBySize(ctx, conn, db.FileListRecordBySizeParams{TenantCode: p.TenantCode, Entity: p.Entity, EntityID: p.EntityID,
			UserID: p.UserID, DepartmentCode: p.DepartmentCode, Now: p.Now, Module: p.Module, ContentType: p.ContentType,
			ContentTypePrefix: p.ContentTypePrefix, Visibility: p.Visibility, IsTemporary: p.IsTemporary, CreatedFrom: p.CreatedFrom,
			CreatedBefore: p.CreatedBefore, NamePrefix: p.NamePrefix, AfterSize: 1 << 62, AfterID: uuid.Max, Max: p.Max}))
	}
	return nil, fmt.Errorf("no list shape %q", shape)
}

// TestListPlansUseTheListIndexes: on 100k rows, every list shape with each
// filter alone, with pairs of them and with all of them is answered
// through an index -- never a sequential scan of uploaded_file -- and, with
// no narrowing filter, through its own list index (the order comes from
// the index, so a deep page costs what the first one does) and, whatever
// the filters, reads at most a page's scan budget of the owner's files.
func TestListPlansUseTheListIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	populate(t, b)
	// One owner with many files: where the order must come from the index.
	b.exec(t, `INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at)
SELECT gen_random_uuid(), 'tenant-big', 'user-big', 'core/tenant-big/' || i || '.pdf', 'file-' || i || '.pdf', 1000 + i, 'application/pdf', 'ready',
    $1::timestamptz, $1::timestamptz - i * interval '1 minute', $1::timestamptz
FROM generate_series(1, 20000) AS i`, t0)
	b.exec(t, "ANALYZE uploaded_file")
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	e := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}}
	generic := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}, generic: true}

	s := func(v string) *string { return &v }
	yes, from, before := true, t0.Add(-30*24*time.Hour), t0
	single := map[string]listFilters{
		"none":        {},
		"department":  {dept: s("dept-1")},
		"module":      {module: s("crm")},
		"entity":      {entity: s("invoice"), entityID: s("entity-7")},
		"type":        {contentType: s("application/pdf")},
		"family":      {contentPrefix: s("application/")},
		"visibility":  {visibility: s("private")},
		"temporary":   {temporary: &yes},
		"created":     {from: &from, before: &before},
		"name prefix": {namePrefix: s("file-1")},
	}
	combos := map[string]listFilters{}
	for k, v := range single {
		combos[k] = v
	}
	combos["attachment + type + created"] = listFilters{module: s("crm"), entity: s("invoice"), entityID: s("entity-7"), contentType: s("application/pdf"), from: &from}
	combos["family + visibility + name"] = listFilters{contentPrefix: s("application/"), visibility: s("private"), namePrefix: s("file-")}
	combos["department + temporary + created"] = listFilters{dept: s("dept-1"), temporary: &yes, from: &from, before: &before}
	combos["everything"] = listFilters{dept: s("dept-1"), module: s("crm"), entity: s("invoice"), entityID: s("entity-7"),
		contentType: s("application/pdf"), visibility: s("private"), temporary: &yes, from: &from, before: &before, namePrefix: s("file-7")}

	shapes := map[string]string{
		"OwnerByCreated": "uploaded_file_list_owner_created_idx", "OwnerByName": "uploaded_file_list_owner_name_idx",
		"OwnerBySize": "uploaded_file_list_owner_size_idx", "TenantByCreated": "uploaded_file_list_tenant_created_idx",
		"TenantByName": "uploaded_file_list_tenant_name_idx", "TenantBySize": "uploaded_file_list_tenant_size_idx",
	}
	for shape, own := range shapes {
		for name, f := range combos {
			// A small owner and tenant: any index will do, never the table.
			_, err := listCall(b.ctx, b.q, e, shape, f, "tenant-7", "user-7")
			require.NoError(t, err)
			var small []any
			require.NoError(t, json.Unmarshal([]byte(e.plans[listQuery(shape, f)]), &small))
			require.NotContains(t, seqScans(small), "uploaded_file", "%s with %s scans the table:\n%s", shape, name, e.plans[listQuery(shape, f)])

			// The owner with 20k files: the list index gives the order.
			_, err = listCall(b.ctx, b.q, e, shape, f, "tenant-big", "user-big")
			require.NoError(t, err)
			plan := e.plans[listQuery(shape, f)]
			var nodes []any
			require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
			require.NotContains(t, seqScans(nodes), "uploaded_file", "%s with %s scans the table:\n%s", shape, name, plan)
			used := indexesUsed(plan)
			require.NotEmpty(t, used, "%s with %s: no index", shape, name)
			if name == "none" || name == "visibility" || name == "type" || name == "family" {
				require.Contains(t, used, own, "%s with %s: its list index", shape, name)
			}
			if testing.Verbose() {
				t.Logf("%s / %s: %s", shape, name, strings.Join(used, ", "))
			}
			// However few of the owner's files the filters match, a page
			// reads at most its scan budget of them, under either plan (an
			// owner's department is the scope's, walked with the owner's
			// files: they are the department's but for a user who moved).
			if f.dept == nil || !strings.HasPrefix(shape, "Owner") {
				_, err = listCall(b.ctx, b.q, generic, shape, f, "tenant-big", "user-big")
				require.NoError(t, err)
				for mode, plan := range map[string]string{"custom": plan, "generic": generic.plans[listQuery(shape, f)]} {
					require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
					require.LessOrEqual(t, rowsRead(nodes), float64(listScan+1), "%s with %s (%s plan):\n%s", shape, name, mode, plan)
				}
			}
		}
	}
}

// TestRecordListsReadOnlyTheRecord: the files of one record, in an owner
// and a tenant of 20,000 files, are found through the record index under
// custom and generic plans alike -- no plan reads or sorts the scope's
// other files -- and the three shapes return the record's files.
func TestRecordListsReadOnlyTheRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	populate(t, b)
	b.exec(t, `INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at,
    used_at, module, entity, entity_id)
SELECT gen_random_uuid(), 'tenant-big', 'user-big', 'core/tenant-big/' || i || '.pdf', 'file-' || i || '.pdf', 1000 + i, 'application/pdf', 'ready',
    $1::timestamptz, $1::timestamptz - i * interval '1 minute', $1::timestamptz,
    CASE WHEN i % 5000 = 0 OR i % 2 = 1 THEN $1::timestamptz END,
    CASE WHEN i % 5000 = 0 OR i % 2 = 1 THEN 'crm' END,
    CASE WHEN i % 5000 = 0 OR i % 2 = 1 THEN 'invoice' END,
    CASE WHEN i % 5000 = 0 THEN 'record-x' WHEN i % 2 = 1 THEN 'other-' || i END
FROM generate_series(1, 20000) AS i`, t0)
	b.exec(t, "ANALYZE uploaded_file")
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()

	s := func(v string) *string { return &v }
	for _, mode := range []string{"custom", "generic"} {
		e := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}, generic: mode == "generic"}
		for _, shape := range []string{"RecordByCreated", "RecordByName", "RecordBySize"} {
			for _, user := range []string{"user-big", ""} {
				for name, f := range map[string]listFilters{
					"record":          {entity: s("invoice"), entityID: s("record-x")},
					"record + module": {entity: s("invoice"), entityID: s("record-x"), module: s("crm"), visibility: s("private")},
					"no such record":  {entity: s("invoice"), entityID: s("record-y")},
				} {
					_, err := recordCall(b.ctx, b.q, e, shape, f, "tenant-big", user)
					require.NoError(t, err)
					plan := e.plans[listQuery(shape, f)]
					var nodes []any
					require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
					require.Contains(t, indexesUsed(plan), "uploaded_file_list_record_idx", "%s %s (%s, user %q)", shape, name, mode, user)
					require.Empty(t, append(wastefulFilters(nodes), wastefulSorts(nodes)...), "%s %s (%s, user %q):\n%s", shape, name, mode, user, plan)
				}
				rows, err := recordCall(b.ctx, b.q, b.pool, shape, listFilters{entity: s("invoice"), entityID: s("record-x")}, "tenant-big", user)
				require.NoError(t, err)
				require.Len(t, rows, 4, "%s: the record's four files", shape)
			}
		}
	}
}

// TestDepartmentListsReadOnlyTheDepartment: a tenant's list within a small
// department of a tenant of 20,000 files reads the department's files
// through its own index under custom and generic plans alike -- never the
// tenant's other files -- with or without filters, and the three orders
// return the department's files.
func TestDepartmentListsReadOnlyTheDepartment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	populate(t, b)
	b.exec(t, `INSERT INTO uploaded_file (id, tenant_code, department_code, user_id, key, original_name, size_bytes, content_type, status, completed_at,
    created_at, updated_at)
SELECT gen_random_uuid(), 'tenant-big', CASE WHEN i % 2500 = 0 THEN 'dept-small' ELSE 'dept-big' END, 'user-' || (i % 100),
    'core/tenant-big/' || i || '.pdf', 'file-' || i || '.pdf', 1000 + i, 'application/pdf', 'ready',
    $1::timestamptz, $1::timestamptz - i * interval '1 minute', $1::timestamptz
FROM generate_series(1, 20000) AS i`, t0)
	b.exec(t, "ANALYZE uploaded_file")
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()

	s := func(v string) *string { return &v }
	own := map[string]string{"Created": "uploaded_file_list_department_created_idx", "Name": "uploaded_file_list_department_name_idx",
		"Size": "uploaded_file_list_department_size_idx"}
	for _, mode := range []string{"custom", "generic"} {
		e := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}, generic: mode == "generic"}
		for order, index := range own {
			for name, f := range map[string]listFilters{
				"none":        {dept: s("dept-small")},
				"module":      {dept: s("dept-small"), module: s("crm")},
				"name prefix": {dept: s("dept-small"), namePrefix: s("file-5")},
			} {
				_, err := listCall(b.ctx, b.q, e, "TenantBy"+order, f, "tenant-big", "")
				require.NoError(t, err)
				plan := e.plans[listQuery("TenantBy"+order, f)]
				var nodes []any
				require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
				require.Contains(t, indexesUsed(plan), index, "%s %s (%s)", order, name, mode)
				require.LessOrEqual(t, rowsRead(nodes), float64(9), "%s %s (%s):\n%s", order, name, mode, plan)
				require.Empty(t, append(wastefulFilters(nodes), wastefulSorts(nodes)...), "%s %s (%s):\n%s", order, name, mode, plan)
			}
			rows, err := listCall(b.ctx, b.q, b.pool, "TenantBy"+order, listFilters{dept: s("dept-small")}, "tenant-big", "")
			require.NoError(t, err)
			require.Len(t, rows, 8, "%s: the department's eight files", order)
		}
	}
}
