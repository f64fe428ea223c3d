package service_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

func policy(d service.AccessDecision, err error) func(*service.Config) {
	return func(c *service.Config) {
		c.AuthorizationPolicy = func(context.Context, service.AuthorizationRequest) (service.AccessDecision, error) { return d, err }
	}
}

func TestPolicyDecisions(t *testing.T) {
	t.Parallel()
	// Owner-only without a policy: bob (same tenant) cannot read alice's file.
	b := setup(t, service.DriverLocal)
	f := b.upload(alice)
	_, err := b.svc.Find(as("acme", "bob", "sales"), f.ID.String())
	requireNotFound(t, err)

	tenant := setup(t, service.DriverLocal, policy(service.DecisionTenant, nil))
	g := tenant.upload(alice)
	_, err = tenant.svc.Find(as("acme", "bob", "sales"), g.ID.String())
	require.NoError(t, err, "the tenant decision drops the owner predicate")
	_, err = tenant.svc.Find(as("acme", "bob", "support"), g.ID.String())
	requireNotFound(t, err, "but never the department boundary")
	_, err = tenant.svc.Find(as("globex", "bob", "sales"), g.ID.String())
	requireNotFound(t, err, "nor the tenant boundary")

	for name, mod := range map[string]func(*service.Config){
		"deny":          policy(service.DecisionDeny, nil),
		"error":         policy(service.DecisionTenant, errors.New("policy backend down")),
		"unknown value": policy("admin", nil),
		"panic": func(c *service.Config) {
			c.AuthorizationPolicy = func(context.Context, service.AuthorizationRequest) (service.AccessDecision, error) { panic("boom") }
		},
	} {
		d := setup(t, service.DriverLocal, mod)
		_, err := d.svc.Upload(alice, strings.NewReader(pdf), "report.pdf", nil)
		requireNotFound(t, err, name)
		require.Zero(t, d.rowCount(), name)
	}
}

func TestPolicySeesBoundedValidatedInput(t *testing.T) {
	t.Parallel()
	var got []service.AuthorizationRequest
	b := setup(t, service.DriverLocal, func(c *service.Config) {
		c.AuthorizationPolicy = func(_ context.Context, r service.AuthorizationRequest) (service.AccessDecision, error) {
			got = append(got, r)
			return service.DecisionOwner, nil
		}
	})
	f := b.upload(alice)
	_, err := b.svc.Find(alice, f.ID.String())
	require.NoError(t, err)
	require.NoError(t, b.svc.UseFiles(alice, []string{f.Key, f.Key}, "invoice", "1"))
	_, err = b.svc.Find(alice, "not-a-uuid")
	requireNotFound(t, err)

	require.Len(t, got, 3, "a malformed id never reaches the policy")
	require.Equal(t, service.OpCreate, got[0].Operation)
	require.Equal(t, service.OpRead, got[1].Operation)
	require.Equal(t, []uuid.UUID{f.ID}, got[1].IDs)
	require.Equal(t, service.Scope{TenantCode: "acme", DepartmentCode: ptr("sales"), UserID: "alice"}, got[1].Scope)
	require.Equal(t, []string{f.Key}, got[2].References, "validated and deduplicated")
}

func TestNoContextFailsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f := b.upload(alice)
	bare := context.Background()
	_, err := b.svc.Upload(bare, strings.NewReader(pdf), "report.pdf", nil)
	requireNotFound(t, err)
	_, err = b.svc.Find(bare, f.ID.String())
	requireNotFound(t, err)
	requireNotFound(t, b.svc.DeleteByID(bare, f.ID.String()))
	requireNotFound(t, b.svc.MarkUsed(bare, []string{f.ID.String()}, nil, nil))
	// A context without a tenant or user resolves to nothing.
	_, err = b.svc.Find(service.WithRequestContext(bare, service.RequestContext{UserID: "alice"}), f.ID.String())
	requireNotFound(t, err)
	// The custom fallback of the default resolver.
	custom := service.WithRequestContext(bare, service.RequestContext{Custom: map[string]any{"tenantCode": "acme", "userId": "alice", "departmentCode": "sales"}})
	_, err = b.svc.Find(custom, f.ID.String())
	require.NoError(t, err)
}

// TestNotFoundIsIndistinguishable: every operation, for every way a file can
// be unreachable, fails with the identical error.
func TestNotFoundIsIndistinguishable(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, policy(service.DecisionOwner, nil))
	ctx := context.Background()

	mine := b.upload(alice)
	hidden := b.upload(alice)
	b.exec("UPDATE uploaded_file SET status = 'pending', upload_pending_at = now() + interval '1 hour' WHERE id = $1", hidden.ID)
	deleted := b.upload(alice)
	b.exec("UPDATE uploaded_file SET deleted_at = now() WHERE id = $1", deleted.ID)

	denySvc := b.another(policy(service.DecisionDeny, nil))

	cases := map[string]struct {
		svc *service.Service
		ctx context.Context
		id  string
		ref string
	}{
		"missing id":                {b.svc, alice, uuid.NewString(), "core/missing"},
		"malformed id":              {b.svc, alice, "../../etc/passwd", strings.Repeat("x", 10)},
		"another tenant":            {b.svc, as("globex", "alice", "sales"), mine.ID.String(), mine.Key},
		"another department":        {b.svc, as("acme", "alice", "support"), mine.ID.String(), mine.Key},
		"another owner (owner)":     {b.svc, as("acme", "bob", "sales"), mine.ID.String(), mine.Key},
		"deny decision":             {denySvc, alice, mine.ID.String(), mine.Key},
		"in-flight (hidden) row":    {b.svc, alice, hidden.ID.String(), hidden.Key},
		"soft-deleted row":          {b.svc, alice, deleted.ID.String(), deleted.Key},
		"no trusted context at all": {b.svc, ctx, mine.ID.String(), mine.Key},
	}
	ops := map[string]func(s *service.Service, ctx context.Context, id, ref string) error{
		"Find": func(s *service.Service, ctx context.Context, id, _ string) error {
			_, err := s.Find(ctx, id)
			return err
		},
		"FindByID": func(s *service.Service, ctx context.Context, id, _ string) error {
			_, err := service.FindByID[map[string]any](ctx, s, id)
			return err
		},
		"ResolveURL": func(s *service.Service, ctx context.Context, id, _ string) error {
			_, err := s.ResolveURL(ctx, id)
			return err
		},
		"Download": func(s *service.Service, ctx context.Context, id, _ string) error {
			d, err := s.Download(ctx, id)
			if err == nil {
				d.Body.Close()
			}
			return err
		},
		"DeleteByID": func(s *service.Service, ctx context.Context, id, _ string) error { return s.DeleteByID(ctx, id) },
		"MarkUsed": func(s *service.Service, ctx context.Context, id, _ string) error {
			return s.MarkUsed(ctx, []string{id}, nil, nil)
		},
		"SetExtraData": func(s *service.Service, ctx context.Context, id, _ string) error {
			return service.SetExtraData(ctx, s, id, map[string]any{"a": 1})
		},
		"UseFiles": func(s *service.Service, ctx context.Context, _, ref string) error {
			return s.UseFiles(ctx, []string{ref}, "e", "1")
		},
		"Delete": func(s *service.Service, ctx context.Context, _, ref string) error {
			return s.Delete(ctx, []string{ref})
		},
		"ChangeFiles": func(s *service.Service, ctx context.Context, _, ref string) error {
			return s.ChangeFiles(ctx, []string{ref}, nil, "e", "1")
		},
		"DownloadAttached": func(s *service.Service, ctx context.Context, id, _ string) error {
			_, err := s.DownloadAttached(ctx, id, service.Attachment{Module: "m", Entity: "e", EntityID: "1"})
			return err
		},
	}
	for caseName, c := range cases {
		for opName, op := range ops {
			err := op(c.svc, c.ctx, c.id, c.ref)
			require.Error(t, err, "%s / %s", opName, caseName)
			require.Same(t, service.ErrNotFound, unwrapCode(err), "%s / %s: %v", opName, caseName, err)
			require.Equal(t, "core.file.not-found", err.Error(), "%s / %s: the same message", opName, caseName)
		}
	}
	// And the file was untouched by all of that.
	d, err := b.svc.Download(alice, mine.ID.String())
	require.NoError(t, err)
	body, _ := io.ReadAll(d.Body)
	d.Body.Close()
	require.Equal(t, pdf, string(body))
}

func unwrapCode(err error) error {
	var e *service.Error
	if errors.As(err, &e) {
		return e
	}
	return err
}
