// Package policy compiles the server mode's policies, written as CEL
// expressions in the configuration, into the service's policy callbacks.
//
// authorizationPolicy must evaluate to a string ("owner", "tenant" or
// "deny"); attachedReadPolicy to a bool. Both see:
//
//	context     {tenant, userId, roles, permissions, custom}
//	scope       {tenantCode, departmentCode, userId}
//
// and authorizationPolicy also
//
//	operation   the operation ("create", "read", "delete", ...)
//	ids         the validated file ids of the call (strings)
//	references  the exact storage references of the call
//
// and attachedReadPolicy also
//
//	id          the file id
//	attachment  {module, entity, entityId}
//
// Example: `"admin" in context.roles ? "tenant" : "owner"`.
//
// A bad expression fails start-up with a message naming the option; an
// evaluation error is a deny (the service treats a policy error as deny).
package policy

import (
	"context"
	"fmt"

	"github.com/google/cel-go/cel"

	"github.com/uploadedfile/uploadedfile/service"
)

func env(vars ...cel.EnvOption) (*cel.Env, error) {
	base := []cel.EnvOption{
		cel.Variable("context", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("scope", cel.MapType(cel.StringType, cel.DynType)),
	}
	return cel.NewEnv(append(base, vars...)...)
}

func compile(option, expr string, want *cel.Type, vars ...cel.EnvOption) (cel.Program, error) {
	e, err := env(vars...)
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s: %q does not compile: %w", option, expr, iss.Err())
	}
	if !ast.OutputType().IsExactType(want) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%s: %q must evaluate to a %s, not %s", option, expr, want, ast.OutputType())
	}
	prg, err := e.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(100_000))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", option, err)
	}
	return prg, nil
}

// Authorization compiles an authorizationPolicy expression.
func Authorization(expr string) (service.AuthorizationPolicy, error) {
	prg, err := compile("authorizationPolicy", expr, cel.StringType,
		cel.Variable("operation", cel.StringType),
		cel.Variable("ids", cel.ListType(cel.StringType)),
		cel.Variable("references", cel.ListType(cel.StringType)))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, r service.AuthorizationRequest) (service.AccessDecision, error) {
		ids := make([]string, len(r.IDs))
		for i, id := range r.IDs {
			ids[i] = id.String()
		}
		refs := r.References
		if refs == nil {
			refs = []string{}
		}
		out, _, err := prg.ContextEval(ctx, map[string]any{
			"context": contextVar(r.Context), "scope": scopeVar(r.Scope), "operation": string(r.Operation), "ids": ids, "references": refs,
		})
		if err != nil {
			return service.DecisionDeny, err
		}
		s, _ := out.Value().(string)
		return service.AccessDecision(s), nil
	}, nil
}

// AttachedRead compiles an attachedReadPolicy expression.
func AttachedRead(expr string) (service.AttachedReadPolicy, error) {
	prg, err := compile("attachedReadPolicy", expr, cel.BoolType,
		cel.Variable("id", cel.StringType),
		cel.Variable("attachment", cel.MapType(cel.StringType, cel.StringType)))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, r service.AttachedReadRequest) (bool, error) {
		out, _, err := prg.ContextEval(ctx, map[string]any{
			"context": contextVar(r.Context), "scope": scopeVar(r.Scope), "id": r.ID.String(),
			"attachment": map[string]string{"module": r.Attachment.Module, "entity": r.Attachment.Entity, "entityId": r.Attachment.EntityID},
		})
		if err != nil {
			return false, err
		}
		b, ok := out.Value().(bool)
		return ok && b, nil
	}, nil
}

func contextVar(rc service.RequestContext) map[string]any {
	roles, perms := rc.Roles, rc.Permissions
	if roles == nil {
		roles = []string{}
	}
	if perms == nil {
		perms = []string{}
	}
	custom := rc.Custom
	if custom == nil {
		custom = map[string]any{}
	}
	return map[string]any{"tenant": rc.Tenant, "userId": rc.UserID, "roles": roles, "permissions": perms, "custom": custom}
}

func scopeVar(s service.Scope) map[string]any {
	dept := ""
	if s.DepartmentCode != nil {
		dept = *s.DepartmentCode
	}
	return map[string]any{"tenantCode": s.TenantCode, "departmentCode": dept, "userId": s.UserID}
}
