package policy_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/policy"
	"github.com/uploadedfile/uploadedfile/service"
)

func TestAuthorizationExpression(t *testing.T) {
	t.Parallel()
	p, err := policy.Authorization(`"admin" in context.roles ? "tenant" : (operation == "delete" && size(ids) > 1 ? "deny" : "owner")`)
	require.NoError(t, err)
	ctx := context.Background()
	decide := func(roles []string, op service.Operation, ids int) service.AccessDecision {
		req := service.AuthorizationRequest{Operation: op, Context: service.RequestContext{Tenant: "acme", UserID: "u", Roles: roles}, Scope: service.Scope{TenantCode: "acme", UserID: "u"}}
		for range ids {
			req.IDs = append(req.IDs, uuid.New())
		}
		d, err := p(ctx, req)
		require.NoError(t, err)
		return d
	}
	require.Equal(t, service.DecisionTenant, decide([]string{"admin"}, service.OpRead, 1))
	require.Equal(t, service.DecisionOwner, decide(nil, service.OpRead, 1))
	require.Equal(t, service.DecisionDeny, decide(nil, service.OpDelete, 2))

	custom, err := policy.Authorization(`context.custom.plan == "pro" && scope.departmentCode == "" ? "tenant" : "owner"`)
	require.NoError(t, err)
	d, err := custom(ctx, service.AuthorizationRequest{Context: service.RequestContext{Custom: map[string]any{"plan": "pro"}}})
	require.NoError(t, err)
	require.Equal(t, service.DecisionTenant, d)
}

func TestAttachedReadExpression(t *testing.T) {
	t.Parallel()
	p, err := policy.AttachedRead(`attachment.entity == "invoice" && "invoices:read" in context.permissions`)
	require.NoError(t, err)
	ok, err := p(context.Background(), service.AttachedReadRequest{
		Context: service.RequestContext{Permissions: []string{"invoices:read"}}, Attachment: service.Attachment{Entity: "invoice"},
	})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = p(context.Background(), service.AttachedReadRequest{Attachment: service.Attachment{Entity: "invoice"}})
	require.NoError(t, err)
	require.False(t, ok)
}

func TestBadExpressionsAreNamed(t *testing.T) {
	t.Parallel()
	for expr, option := range map[string]string{
		`context.roles.contains(`: "authorizationPolicy",
		`true`:                    "authorizationPolicy", // not a string
		`nosuchvar == "x"`:        "authorizationPolicy",
	} {
		_, err := policy.Authorization(expr)
		require.ErrorContains(t, err, option, expr)
	}
	_, err := policy.AttachedRead(`"owner"`)
	require.ErrorContains(t, err, "attachedReadPolicy", "must be a bool")
}

// TestEvaluationErrorIsAnError: a runtime failure (a missing map key)
// surfaces as an error, which the service turns into deny.
func TestEvaluationErrorIsAnError(t *testing.T) {
	t.Parallel()
	p, err := policy.Authorization(`context.custom.missing == "x" ? "tenant" : "owner"`)
	require.NoError(t, err)
	_, err = p(context.Background(), service.AuthorizationRequest{})
	require.Error(t, err)
}
