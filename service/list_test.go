package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// listAll walks a list to its end and returns the ids in list order.
func listAll(t *testing.T, svc *service.Service, ctx context.Context, o service.ListOptions) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for range 10_000 {
		p, err := svc.List(ctx, o)
		require.NoError(t, err)
		for _, f := range p.Files {
			ids = append(ids, f.ID)
		}
		if p.NextCursor == "" {
			return ids
		}
		o.Cursor = p.NextCursor
	}
	t.Fatal("the list never ended")
	return nil
}

// policyByOp decides OpList with list and everything else as owner.
func policyByOp(list service.AccessDecision) func(*service.Config) {
	return func(c *service.Config) {
		c.AuthorizationPolicy = func(_ context.Context, r service.AuthorizationRequest) (service.AccessDecision, error) {
			if r.Operation == service.OpList {
				return list, nil
			}
			return service.DecisionTenant, nil
		}
	}
}

// TestListNeverShowsWhatADetailHides: for owner, tenant, department and
// deny decisions, a list holds exactly the files a detail request of the
// same caller finds -- never in-flight, deleted, expired or out-of-scope
// ones.
func TestListNeverShowsWhatADetailHides(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, policyByOp(service.DecisionTenant))
	bobSales, carolSupport, mallory := as("acme", "bob", "sales"), as("acme", "carol", "support"), as("globex", "mallory", "sales")
	var all []*service.Result
	for _, who := range []context.Context{alice, alice, bobSales, carolSupport, mallory} {
		all = append(all, b.upload(who))
	}
	// Hidden states: deleted, expired temporary, a pending direct upload,
	// a buffer upload in flight (hidden row).
	deleted := b.upload(alice)
	require.NoError(t, b.svc.DeleteByID(alice, deleted.ID.String()))
	tmp, err := b.svc.UploadTemporary(alice, bytesReader("soon gone"), "tmp.txt", nil)
	require.NoError(t, err)
	b.exec("UPDATE uploaded_file SET expired_at = $2 WHERE id = $1", tmp.ID, b.clock.Now().Add(-time.Second))
	_, err = b.svc.InitiateUpload(alice, input("plan.docx", docxType, realDOCX(t)), nil)
	require.NoError(t, err)
	hidden := b.upload(alice)
	b.exec("UPDATE uploaded_file SET status = 'pending', upload_pending_at = $2 WHERE id = $1", hidden.ID, b.clock.Now().Add(time.Minute))

	// What a detail request of each caller finds, under each list decision.
	for _, decision := range []service.AccessDecision{service.DecisionOwner, service.DecisionTenant, service.DecisionDeny} {
		svc := b.another(policyByOp(decision), func(c *service.Config) {
			prev := c.AuthorizationPolicy
			c.AuthorizationPolicy = func(ctx context.Context, r service.AuthorizationRequest) (service.AccessDecision, error) {
				if r.Operation == service.OpRead {
					return decision, nil // the detail request under the same decision
				}
				return prev(ctx, r)
			}
		})
		for _, who := range []context.Context{alice, bobSales, carolSupport, mallory, as("acme", "dave")} {
			var visible []uuid.UUID
			for _, f := range append(slices.Clone(all), deleted, tmp, hidden) {
				if _, err := svc.Find(who, f.ID.String()); err == nil {
					visible = append(visible, f.ID)
				}
			}
			p, err := svc.List(who, service.ListOptions{})
			if decision == service.DecisionDeny {
				requireNotFound(t, err, "a denied list looks like a missing resource")
				continue
			}
			require.NoError(t, err)
			var listed []uuid.UUID
			for _, f := range p.Files {
				listed = append(listed, f.ID)
				require.Empty(t, f.URL, "no URL unless asked for")
			}
			require.ElementsMatch(t, visible, listed, "%s: the list is what the detail finds", decision)
		}
	}
	// Owner: alice sees her two; tenant (with department sales): alice's and bob's.
	require.Len(t, listAll(t, b.another(policyByOp(service.DecisionOwner)), alice, service.ListOptions{}), 2)
	require.Len(t, listAll(t, b.svc, alice, service.ListOptions{}), 3)
}

// TestListFiltersAndSorts: each filter and their combination, each order,
// pages of any size covering the same rows.
func TestListFiltersAndSorts(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, func(c *service.Config) { c.AllowPublicUploads = true })
	up := func(name, body string, opts ...func(*service.UploadOptions)) *service.Result {
		t.Helper()
		o := &service.UploadOptions{}
		for _, f := range opts {
			f(o)
		}
		r, err := b.svc.Upload(alice, strings.NewReader(body), name, o)
		require.NoError(t, err)
		b.clock.Advance(time.Second)
		return r
	}
	public := func(o *service.UploadOptions) { o.Visibility = service.Public }
	csv := up("Zeta_report.csv", "a,b\n1,2\n")
	pdfA := up("alpha%.pdf", pdf)
	txt := up("alphabet.txt", "hello world, a longer text file\n", public)
	pdfB := up("Beta.pdf", pdf+"% padding to be larger\n")
	tmp, err := b.svc.UploadTemporary(alice, bytesReader("temp"), "alpha-temp.txt", nil)
	require.NoError(t, err)
	require.NoError(t, b.svc.MarkUsed(alice, []string{pdfA.ID.String(), txt.ID.String()}, &service.Meta{Module: "crm", Entity: "invoice", EntityID: "123"}, nil))

	ids := func(o service.ListOptions) []uuid.UUID { return listAll(t, b.svc, alice, o) }
	require.Equal(t, []uuid.UUID{tmp.ID, pdfB.ID, txt.ID, pdfA.ID, csv.ID}, ids(service.ListOptions{}), "newest first")
	require.Equal(t, []uuid.UUID{pdfA.ID, tmp.ID, txt.ID, pdfB.ID, csv.ID}, ids(service.ListOptions{Sort: service.SortName}), "by lower-cased name")
	bySize := ids(service.ListOptions{Sort: service.SortSize})
	require.Equal(t, pdfB.ID, bySize[0], "largest first")
	require.Equal(t, tmp.ID, bySize[len(bySize)-1])
	for _, sort := range []service.ListSort{service.SortCreatedAt, service.SortName, service.SortSize} {
		require.Equal(t, ids(service.ListOptions{Sort: sort}), ids(service.ListOptions{Sort: sort, Limit: 1}), "pages of one cover the same rows (%s)", sort)
	}

	require.ElementsMatch(t, []uuid.UUID{pdfA.ID, txt.ID}, ids(service.ListOptions{Module: "crm", Entity: "invoice", EntityID: "123"}))
	require.Empty(t, ids(service.ListOptions{Entity: "invoice", EntityID: "124"}))
	record := service.ListOptions{Entity: "invoice", EntityID: "123"}
	require.Greater(t, pdfA.SizeBytes, txt.SizeBytes)
	for sort, want := range map[service.ListSort][]uuid.UUID{
		service.SortCreatedAt: {txt.ID, pdfA.ID}, service.SortName: {pdfA.ID, txt.ID}, service.SortSize: {pdfA.ID, txt.ID},
	} {
		o := record
		o.Sort = sort
		require.Equal(t, want, ids(o), "a record's files in order (%s)", sort)
		o.Limit = 1
		require.Equal(t, want, ids(o), "a record's files in pages of one (%s)", sort)
	}
	require.Equal(t, []uuid.UUID{txt.ID}, ids(service.ListOptions{Entity: "invoice", EntityID: "123", Visibility: service.Public}), "a record's files, filtered")
	require.ElementsMatch(t, []uuid.UUID{pdfA.ID, pdfB.ID}, ids(service.ListOptions{ContentType: "application/pdf"}))
	require.ElementsMatch(t, []uuid.UUID{txt.ID, tmp.ID, csv.ID}, ids(service.ListOptions{ContentType: "text/*"}))
	require.Equal(t, []uuid.UUID{txt.ID}, ids(service.ListOptions{Visibility: service.Public}))
	yes, no := true, false
	require.Equal(t, []uuid.UUID{tmp.ID}, ids(service.ListOptions{Temporary: &yes}))
	require.Len(t, ids(service.ListOptions{Temporary: &no}), 4)
	from, before := pdfA.CreatedAt, pdfB.CreatedAt
	require.Equal(t, []uuid.UUID{txt.ID, pdfA.ID}, ids(service.ListOptions{CreatedFrom: &from, CreatedBefore: &before}), "from inclusive, before exclusive")
	require.Equal(t, []uuid.UUID{pdfA.ID, tmp.ID, txt.ID}, ids(service.ListOptions{NamePrefix: "ALPHA", Sort: service.SortName}), "case-insensitive prefix")
	require.Equal(t, []uuid.UUID{pdfA.ID}, ids(service.ListOptions{NamePrefix: "alpha%"}), "% is a literal character")
	require.Empty(t, ids(service.ListOptions{NamePrefix: "zeta%"}))
	require.Equal(t, []uuid.UUID{csv.ID}, ids(service.ListOptions{NamePrefix: "zeta_"}), "_ is a literal character")
	require.Equal(t, []uuid.UUID{txt.ID}, ids(service.ListOptions{NamePrefix: "alpha", ContentType: "text/*", Visibility: service.Public, Temporary: &no, Module: "crm"}), "filters combine")

	p, err := b.svc.List(alice, service.ListOptions{WithURLs: true, Limit: 2})
	require.NoError(t, err)
	for _, f := range p.Files {
		require.NotEmpty(t, f.URL, "a URL per entry on request")
	}

	// The detail reads fewer columns than the list (FileGetDetail against
	// the whole row): for every kind of file here -- public, temporary,
	// attached, with extra data -- it answers the same, field by field.
	require.NoError(t, service.SetExtraData(alice, b.svc, pdfB.ID.String(), invoiceData{Pages: 2, Source: "scan"}))
	all, err := b.svc.List(alice, service.ListOptions{WithURLs: true})
	require.NoError(t, err)
	require.Len(t, all.Files, 5)
	for _, f := range all.Files {
		got, err := b.svc.Find(alice, f.ID.String())
		require.NoError(t, err)
		// Each resolution grants its own URL (a fresh seal): the same
		// route and expiry, a different grant.
		require.Equal(t, urlBase(f.URL), urlBase(got.URL), f.OriginalName)
		if f.URLExpiredAt != nil {
			require.True(t, f.URLExpiredAt.Equal(*got.URLExpiredAt), f.OriginalName)
		}
		f.URL, got.URL, f.URLExpiredAt, got.URLExpiredAt = "", "", nil, nil
		require.Equal(t, f, got, f.OriginalName)
	}

	for name, o := range map[string]service.ListOptions{
		"limit too large":  {Limit: 201},
		"negative limit":   {Limit: -1},
		"unknown sort":     {Sort: "owner"},
		"bad type":         {ContentType: "image/"},
		"wildcard subtype": {ContentType: "*/*"},
		"bad visibility":   {Visibility: "secret"},
		"empty range":      {CreatedFrom: &before, CreatedBefore: &from},
		"control in name":  {NamePrefix: "a\x00"},
		"long entity":      {Entity: strings.Repeat("e", 256)},
	} {
		_, err := b.svc.List(alice, o)
		require.ErrorIs(t, err, service.ErrInvalidMeta, name)
	}
}

// TestListCursorIsBoundAndSigned: a cursor works only for the scope,
// filters and order it was issued for; a forged or altered one is
// core.file.invalid-meta.
func TestListCursorIsBoundAndSigned(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	for range 3 {
		b.upload(alice)
		b.upload(as("acme", "bob", "sales"))
	}
	p, err := b.svc.List(alice, service.ListOptions{Limit: 1})
	require.NoError(t, err)
	c := p.NextCursor
	require.NotEmpty(t, c)
	_, err = b.svc.List(alice, service.ListOptions{Limit: 1, Cursor: c})
	require.NoError(t, err)

	body, sig, _ := strings.Cut(c, ".")
	for name, bad := range map[string]struct {
		ctx context.Context
		o   service.ListOptions
	}{
		"another user":      {as("acme", "bob", "sales"), service.ListOptions{Cursor: c}},
		"another tenant":    {as("globex", "alice", "sales"), service.ListOptions{Cursor: c}},
		"another order":     {alice, service.ListOptions{Cursor: c, Sort: service.SortName}},
		"another filter":    {alice, service.ListOptions{Cursor: c, ContentType: "application/pdf"}},
		"altered body":      {alice, service.ListOptions{Cursor: flip(body) + "." + sig}},
		"altered signature": {alice, service.ListOptions{Cursor: body + "." + flip(sig)}},
		"no signature":      {alice, service.ListOptions{Cursor: body}},
		"garbage":           {alice, service.ListOptions{Cursor: "not-a-cursor"}},
	} {
		_, err := b.svc.List(bad.ctx, bad.o)
		require.ErrorIs(t, err, service.ErrInvalidMeta, name)
		require.Equal(t, "core.file.invalid-meta", err.Error(), name)
	}
	// Another replica honours it (the key is shared through the database).
	_, err = b.another().List(alice, service.ListOptions{Limit: 1, Cursor: c})
	require.NoError(t, err)
}

func flip(s string) string {
	r := []byte(s)
	if r[0] == 'A' {
		r[0] = 'B'
	} else {
		r[0] = 'A'
	}
	return string(r)
}

// TestListPagingUnderChurn: paging through 10k files while another
// goroutine inserts and deletes: no file appears twice, and every file that
// existed for the whole walk appears.
func TestListPagingUnderChurn(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	// 10k visible rows for alice, written directly (an upload each would
	// take minutes); a thousand of them will be deleted during the walk.
	b.exec(`INSERT INTO uploaded_file (id, tenant_code, department_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at)
SELECT gen_random_uuid(), 'acme', 'sales', 'alice', 'core/acme/' || i || '.pdf', 'file-' || (i % 997) || '.pdf', i % 5000, 'application/pdf', 'ready',
    $1::timestamptz, $1::timestamptz - (i % 3000) * interval '1 second', $1::timestamptz
FROM generate_series(1, 10000) AS i`, b.clock.Now())
	rows, err := b.db.Pool.Query(context.Background(), "SELECT id FROM uploaded_file")
	require.NoError(t, err)
	var stable []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		stable = append(stable, id)
	}
	require.NoError(t, rows.Err())
	doomed := stable[:1000]
	stable = stable[1000:]

	for _, sort := range []service.ListSort{service.SortCreatedAt, service.SortName, service.SortSize} {
		t.Run(string(sort), func(t *testing.T) {
			stop := make(chan struct{})
			var churn sync.WaitGroup
			var inserted atomic.Int64
			churn.Add(1)
			go func() {
				defer churn.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					f, err := b.svc.Upload(alice, strings.NewReader(fmt.Sprintf("row %d\n", i)), fmt.Sprintf("file-%d.txt", i%997), nil)
					if err != nil {
						t.Error(err)
						return
					}
					inserted.Add(1)
					if i%2 == 0 {
						if err := b.svc.DeleteByID(alice, f.ID.String()); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
			// Deleting pre-existing rows mid-walk too.
			go func() {
				for _, id := range doomed {
					select {
					case <-stop:
						return
					default:
					}
					_ = b.svc.DeleteByID(alice, id.String())
				}
			}()
			got := listAll(t, b.svc, alice, service.ListOptions{Sort: sort, Limit: 200})
			close(stop)
			churn.Wait()
			seen := make(map[uuid.UUID]bool, len(got))
			for _, id := range got {
				require.False(t, seen[id], "%s listed twice", id)
				seen[id] = true
			}
			for _, id := range stable {
				require.True(t, seen[id], "%s existed for the whole walk but was skipped", id)
			}
			require.Positive(t, inserted.Load(), "the churn ran during the walk")
		})
	}
}

// urlBase is a resolved URL without its grant (the part each resolution
// seals afresh).
func urlBase(u string) string {
	base, _, _ := strings.Cut(u, "&grant=")
	return base
}

// TestListPagesReadAtMostTheScanBudget: a filter that matches three of an
// owner's 2,600 files, in each order, pages through them a scan budget at
// a time -- each page reads at most service.ListScanBudget files, so a
// page may hold fewer files than its limit and still have a cursor -- and
// the walk finds each matching file once, in order; a filter that matches
// none ends after the same three pages, each empty.
func TestListPagesReadAtMostTheScanBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	const n = 2600
	rare := []int{100, 1500, 2550} // by position in every order
	b.exec(`INSERT INTO uploaded_file (id, tenant_code, department_code, user_id, key, original_name, size_bytes, content_type, status, completed_at,
    created_at, updated_at, module)
SELECT gen_random_uuid(), 'acme', 'sales', 'alice', 'core/acme/' || i || '.pdf', 'file-' || lpad(i::text, 5, '0') || '.pdf', 100000 - i, 'application/pdf',
    'ready', $1::timestamptz, $1::timestamptz - i * interval '1 second', $1::timestamptz, CASE WHEN i = ANY($3::int[]) THEN 'rare' END
FROM generate_series(1, $2::int) AS i`, b.clock.Now(), n, rare)
	want := make([]string, len(rare))
	for i, pos := range rare {
		want[i] = fmt.Sprintf("file-%05d.pdf", pos)
	}
	pages := (n + service.ListScanBudget - 1) / service.ListScanBudget
	for _, sort := range []service.ListSort{service.SortCreatedAt, service.SortName, service.SortSize} {
		for module, found := range map[string][]string{"rare": want, "none-such": nil} {
			o := service.ListOptions{Sort: sort, Module: module, Limit: 50}
			var names []string
			var sizes []int
			for range pages {
				p, err := b.svc.List(alice, o)
				require.NoError(t, err)
				sizes = append(sizes, len(p.Files))
				for _, f := range p.Files {
					names = append(names, f.OriginalName)
				}
				o.Cursor = p.NextCursor
				if o.Cursor == "" {
					break
				}
			}
			require.Empty(t, o.Cursor, "%s %s: the walk ends after %d pages", sort, module, pages)
			require.Len(t, sizes, pages, "%s %s: one page per budget read", sort, module)
			require.Equal(t, found, names, "%s %s", sort, module)
			if found != nil {
				require.Equal(t, []int{1, 1, 1}, sizes, "%s: each matching file on the page whose budget reached it", sort)
			}
		}
	}
	// No filter: full pages, the budget never in the way.
	require.Len(t, listAll(t, b.svc, alice, service.ListOptions{Limit: service.ListMaxLimit}), n)
}

// TestListItemsAreTheFilesDetail: a file in a list page -- the owner's,
// the department's, the tenant's, a record's, in each order, and a
// filtered walk -- is the file its detail finds, field for field (the
// pages read fewer columns than the detail; none a Result shows may be
// left out).
func TestListItemsAreTheFilesDetail(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f, err := b.svc.UploadLegacy(alice, strings.NewReader(pdf), "Quarterly.pdf",
		&service.Meta{Module: "crm", Entity: "invoice", EntityID: "inv-7", Type: "scan"}, map[string]any{"pages": 3}, nil)
	require.NoError(t, err)
	want, err := b.svc.Find(alice, f.ID.String())
	require.NoError(t, err)
	require.NotEmpty(t, want.Checksum)
	require.JSONEq(t, `{"pages": 3}`, string(want.ExtraData))
	withoutURL := func(r service.Result) service.Result {
		r.URL, r.URLExpiredAt = "", nil
		return r
	}
	// With a department and without: the owner's pages with and without
	// its predicate, the department's and the tenant's.
	for _, decision := range []service.AccessDecision{service.DecisionOwner, service.DecisionTenant} {
		for _, who := range []context.Context{alice, as("acme", "alice")} {
			svc := b.another(policyByOp(decision))
			for _, o := range []service.ListOptions{
				{}, {Sort: service.SortName}, {Sort: service.SortSize},
				{Entity: "invoice", EntityID: "inv-7"}, {Entity: "invoice", EntityID: "inv-7", Sort: service.SortName},
				{Entity: "invoice", EntityID: "inv-7", Sort: service.SortSize}, {Module: "crm"},
			} {
				p, err := svc.List(who, o)
				require.NoError(t, err)
				require.Len(t, p.Files, 1, "%s %+v", decision, o)
				require.Equal(t, withoutURL(*want), withoutURL(*p.Files[0]), "%s %+v", decision, o)
			}
		}
	}
}
