package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/service"
)

// scaleDepth is how many pages of 50 the deep list calls start after:
// 500 files deep, which the heavy owner holds at 100k rows too.
const scaleDepth = 10

// scaleFixture is what the calls of one scale target use: a caller of a
// big tenant (tenant-0's user-0, 100,000 files at 10 million rows) and an
// auditor of that tenant (the tenant decision), a sample of the caller's
// files, a record, cursors scaleDepth pages deep, and stored files to
// download.
type scaleFixture struct {
	t                     *scaleTarget
	owner, auditor        context.Context
	ids, stored           []string
	record                string
	deepOwner, deepTenant string
	payload               []byte
	payloadSum            string
}

// scaleRounds is how many rounds scaleCost times each call in at each
// size. With five rounds of 100-200 calls (10-30 ms a round), two tables of
// the same size read 0.57-1.29× of each other; rounds of about 150 ms and
// more of them are what the ratios need to mean anything.
const scaleRounds = 9

// scaleOp is one measured call.
type scaleOp struct {
	name    string
	calls   int // per round and target: about 150 ms of calls at 100k
	call    func(f *scaleFixture, i int) error
	objects int // objects one call walks (0: not a walk); the row adds objects per second
}

// scaleOps are the calls bench-scale compares across table sizes, each
// through the service (the handler adds the same work at every size).
var scaleOps = []scaleOp{
	{name: "detail of an owner's file", calls: 1500, call: func(f *scaleFixture, i int) error { _, err := f.t.svc.Find(f.owner, f.ids[i%len(f.ids)]); return err }},
	{name: "list: the owner's first page of 50", calls: 500, call: func(f *scaleFixture, _ int) error { return list(f.owner, f, service.ListOptions{Limit: 50}) }},
	{name: "list: the owner's page 11", calls: 500, call: func(f *scaleFixture, _ int) error {
		return list(f.owner, f, service.ListOptions{Limit: 50, Cursor: f.deepOwner})
	}},
	{name: "list: the tenant's first page of 50", calls: 500, call: func(f *scaleFixture, _ int) error { return list(f.auditor, f, service.ListOptions{Limit: 50}) }},
	{name: "list: the tenant's page 11", calls: 500, call: func(f *scaleFixture, _ int) error {
		return list(f.auditor, f, service.ListOptions{Limit: 50, Cursor: f.deepTenant})
	}},
	{name: "list: a record's files", calls: 800, call: func(f *scaleFixture, _ int) error {
		return list(f.auditor, f, service.ListOptions{Limit: 50, Entity: "invoice", EntityID: f.record})
	}},
	{name: "usage of the owner", calls: 1000, call: func(f *scaleFixture, _ int) error { _, err := f.t.svc.Usage(f.owner); return err }},
	{name: "download of 64 KiB", calls: 1500, call: func(f *scaleFixture, i int) error {
		d, err := f.t.svc.Download(f.owner, f.stored[i%len(f.stored)])
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, d.Body)
		return firstError(err, d.Body.Close())
	}},
	{name: "buffer upload of 64 KiB", calls: 100, call: func(f *scaleFixture, _ int) error {
		_, err := f.t.svc.Upload(f.owner, bytes.NewReader(f.payload), "data.csv", nil)
		return err
	}},
	{name: "direct upload of 64 KiB (initiate, bytes, complete)", calls: 40, call: func(f *scaleFixture, _ int) error {
		init, err := f.t.svc.InitiateUpload(f.owner, service.InitiateInput{OriginalName: "data.csv", ContentType: "text/csv",
			SizeBytes: int64(len(f.payload)), Checksum: f.payloadSum}, nil)
		if err != nil {
			return err
		}
		id := init.File.ID.String()
		if _, err := f.t.svc.PutUploadContent(f.owner, id, bytes.NewReader(f.payload)); err != nil {
			return err
		}
		_, err = f.t.svc.CompleteUpload(f.owner, id)
		return err
	}},
	reconcileOp,
}

// list runs one list call and fails on an empty page (a fixture that
// selects nothing measures nothing).
func list(ctx context.Context, f *scaleFixture, o service.ListOptions) error {
	p, err := f.t.svc.List(ctx, o)
	if err == nil && len(p.Files) == 0 {
		err = fmt.Errorf("an empty page (%+v)", o)
	}
	return err
}

// firstError is the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// prepareScale builds t's fixture: the callers, a sample of the owner's
// files (its first four pages), a record of the tenant, cursors
// scaleDepth pages deep into the owner's and the tenant's lists, 20 stored files
// and the objects reconcile walks.
func prepareScale(ctx context.Context, t *scaleTarget) (*scaleFixture, error) {
	f := &scaleFixture{t: t,
		owner:   service.WithRequestContext(ctx, service.RequestContext{Tenant: "tenant-0", UserID: "user-0"}),
		auditor: service.WithRequestContext(ctx, service.RequestContext{Tenant: "tenant-0", UserID: "auditor", Roles: []string{"auditor"}}),
	}
	var b strings.Builder
	for i := 0; b.Len() < 64<<10; i++ {
		fmt.Fprintf(&b, "%d,%d,row\n", i, i*7)
	}
	f.payload = []byte(b.String()[:64<<10-1] + "\n")
	sum := sha256.Sum256(f.payload)
	f.payloadSum = "sha256:" + base64.StdEncoding.EncodeToString(sum[:])
	walk := func(ctx context.Context, pages int, each func(*service.Page)) (string, error) {
		cursor := ""
		for range pages {
			p, err := t.svc.List(ctx, service.ListOptions{Limit: 50, Cursor: cursor})
			if err != nil {
				return "", err
			}
			each(p)
			if cursor = p.NextCursor; cursor == "" {
				return "", fmt.Errorf("the list ended before page %d", pages+1)
			}
		}
		return cursor, nil
	}
	var err error
	if f.deepOwner, err = walk(f.owner, scaleDepth, func(p *service.Page) {
		for _, r := range p.Files {
			if len(f.ids) < 200 {
				f.ids = append(f.ids, r.ID.String())
			}
		}
	}); err != nil {
		return nil, fmt.Errorf("the owner's list: %w", err)
	}
	if f.deepTenant, err = walk(f.auditor, scaleDepth, func(*service.Page) {}); err != nil {
		return nil, fmt.Errorf("the tenant's list: %w", err)
	}
	if err := t.pool.QueryRow(ctx, `SELECT entity_id FROM uploaded_file WHERE tenant_code = 'tenant-0' AND user_id = 'user-0'
AND entity_id IS NOT NULL AND status = 'ready' AND deleted_at IS NULL AND deletion_pending_at IS NULL LIMIT 1`).Scan(&f.record); err != nil {
		return nil, fmt.Errorf("a record: %w", err)
	}
	for range 20 {
		r, err := t.svc.Upload(f.owner, bytes.NewReader(f.payload), "stored.csv", nil)
		if err != nil {
			return nil, err
		}
		f.stored = append(f.stored, r.ID.String())
	}
	if err := writeReconcileObjects(ctx, t); err != nil {
		return nil, fmt.Errorf("reconcile's objects: %w", err)
	}
	return f, nil
}

// scaleCost times op on every fixture: warm-up calls first (past the five
// after which PostgreSQL may plan a prepared statement generically), then
// rounds of op.calls calls, each size in turn and each round starting
// with the next size (roundOrder), so that a drift of the machine, and the
// aftermath of one size's calls, fall on every size alike. It returns each
// fixture's median time per call.
func scaleCost(fs []*scaleFixture, op scaleOp) ([]time.Duration, error) {
	for _, f := range fs {
		for i := range 20 {
			if err := op.call(f, i); err != nil {
				return nil, fmt.Errorf("%s (%d rows): %w", op.name, f.t.total, err)
			}
		}
	}
	per := make([][]time.Duration, len(fs))
	for r := range scaleRounds {
		for _, j := range roundOrder(r, len(fs)) {
			f := fs[j]
			start := time.Now()
			for i := range op.calls {
				if err := op.call(f, i); err != nil {
					return nil, fmt.Errorf("%s (%d rows): %w", op.name, f.t.total, err)
				}
			}
			per[j] = append(per[j], time.Since(start)/time.Duration(op.calls))
		}
	}
	out := make([]time.Duration, len(fs))
	for j := range per {
		slices.Sort(per[j])
		out[j] = per[j][len(per[j])/2]
	}
	return out, nil
}

// ownerPageBlocks is what a page of the owner's built files reads (past
// the files the calls above uploaded), from EXPLAIN (ANALYZE, BUFFERS) of
// the list's statement shape:
// blocks found in PostgreSQL's shared buffers and blocks read from the
// operating system (its page cache, here). The same count at both sizes
// with more of it read means the table outgrew the shared buffers, not
// that the plan does more work.
func ownerPageBlocks(ctx context.Context, f *scaleFixture) (hit, read float64, err error) {
	var plan []byte
	err = f.t.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
SELECT * FROM uploaded_file
WHERE tenant_code = 'tenant-0' AND user_id = 'user-0' AND status = 'ready'
    AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL
    AND created_at < now() - interval '1 hour'
ORDER BY created_at DESC, id DESC LIMIT 51`).Scan(&plan)
	if err != nil {
		return 0, 0, err
	}
	var out []struct {
		Plan struct {
			Hit  float64 `json:"Shared Hit Blocks"`
			Read float64 `json:"Shared Read Blocks"`
		}
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) == 0 {
		return 0, 0, fmt.Errorf("the owner's page plan: %w (%s)", err, plan)
	}
	return out[0].Plan.Hit, out[0].Plan.Read, nil
}

// ownerListGenericPlan is the plan a prepared owner's list runs once
// PostgreSQL plans it without its arguments (after five calls): its scan,
// the rows it read for the page and the blocks it touched.
func ownerListGenericPlan(ctx context.Context, f *scaleFixture) (string, error) {
	stmt := &statementOf{}
	_, _ = db.New().FileListOwnerByCreated(ctx, stmt, db.FileListOwnerByCreatedParams{
		TenantCode: "tenant-0", UserID: "user-0", AfterCreated: time.Now().Add(-time.Hour), AfterID: uuid.Max, Max: 51,
	})
	conn, err := f.t.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return "", err
	}
	if _, err := conn.Conn().Prepare(ctx, "owner_list", stmt.sql); err != nil {
		return "", err
	}
	defer func() {
		_ = conn.Conn().Deallocate(context.WithoutCancel(ctx), "owner_list")
		_, _ = conn.Exec(context.WithoutCancel(ctx), "RESET plan_cache_mode")
	}()
	params := make([]string, len(stmt.args))
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	// EXPLAIN EXECUTE takes no parameters of its own: the arguments go in
	// as literals (the simple protocol writes them into the text), and the
	// prepared statement runs its generic plan with them.
	var plan []byte
	explain := "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE owner_list(" + strings.Join(params, ", ") + ")"
	args := append([]any{pgx.QueryExecModeSimpleProtocol}, stmt.args...)
	if err := conn.QueryRow(ctx, explain, args...).Scan(&plan); err != nil {
		return "", err
	}
	var out []struct{ Plan map[string]any }
	if err := json.Unmarshal(plan, &out); err != nil || len(out) == 0 {
		return "", fmt.Errorf("the owner's list plan: %w (%s)", err, plan)
	}
	var scans []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if rel, ok := n["Relation Name"]; ok {
			scans = append(scans, fmt.Sprintf("%v %v: %v rows, %v removed by filter", n["Node Type"], firstOf(n["Index Name"], rel), n["Actual Rows"], firstOf(n["Rows Removed by Filter"], 0)))
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			if m, ok := c.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(out[0].Plan)
	return fmt.Sprintf("%s; %v blocks", strings.Join(scans, "; "), out[0].Plan["Shared Hit Blocks"]), nil
}

// firstOf is v unless it is nil, else or.
func firstOf(v, or any) any {
	if v == nil {
		return or
	}
	return v
}

// statementOf is a db.DBTX that keeps the statement and arguments a query
// is called with and runs nothing: the scale bench explains the very
// statement the service runs.
type statementOf struct {
	sql  string
	args []any
}

var errNotRun = errors.New("statement kept, not run")

func (s *statementOf) keep(sql string, args []any) { s.sql, s.args = sql, args }

func (s *statementOf) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	s.keep(sql, args)
	return pgconn.CommandTag{}, errNotRun
}

func (s *statementOf) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	s.keep(sql, args)
	return nil, errNotRun
}

func (s *statementOf) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	s.keep(sql, args)
	return errRow{}
}

func (s *statementOf) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return nil }

type errRow struct{}

func (errRow) Scan(...any) error { return errNotRun }
