package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Bounds of every public batch (the documented exported constants).
const (
	// BatchLimit is UPLOADED_FILE_BATCH_LIMIT: ids or references per call.
	BatchLimit = 100
	// ReferenceMaxLength is UPLOADED_FILE_REFERENCE_MAX_LENGTH.
	ReferenceMaxLength = 1024
)

// RequestContext is the trusted context of a call:
// who is acting, for which tenant. The HTTP guard builds it from a verified
// token; a Go host builds it itself. It travels in context.Context.
type RequestContext struct {
	Tenant      string
	UserID      string
	Roles       []string
	Permissions []string
	Custom      map[string]any
}

type requestContextKey struct{}

// WithRequestContext returns ctx carrying rc.
func WithRequestContext(ctx context.Context, rc RequestContext) context.Context {
	return context.WithValue(ctx, requestContextKey{}, rc)
}

// RequestContextFrom returns the trusted context ctx carries.
func RequestContextFrom(ctx context.Context) (RequestContext, bool) {
	rc, ok := ctx.Value(requestContextKey{}).(RequestContext)
	return rc, ok
}

// Scope is the tenant/owner boundary of a call.
type Scope struct {
	TenantCode     string
	DepartmentCode *string // nil: no department boundary
	UserID         string
}

// DefaultResolveScope is the documented fallback: ctx.tenant, then ctx.userId,
// then the matching ctx.custom fields (tenantCode, departmentCode, userId).
func DefaultResolveScope(rc RequestContext) (Scope, error) {
	s := Scope{TenantCode: rc.Tenant, UserID: rc.UserID}
	if s.TenantCode == "" {
		s.TenantCode = customString(rc.Custom, "tenantCode")
	}
	if s.UserID == "" {
		s.UserID = customString(rc.Custom, "userId")
	}
	if d := customString(rc.Custom, "departmentCode"); d != "" {
		s.DepartmentCode = &d
	}
	return s, nil
}

func customString(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// AccessDecision is an authorization outcome.
type AccessDecision string

// The decisions.
const (
	// DecisionOwner: tenant, department (when scoped) and owner predicates.
	DecisionOwner AccessDecision = "owner"
	// DecisionTenant: tenant and department, any owner.
	DecisionTenant AccessDecision = "tenant"
	// DecisionDeny: refused (reported as core.file.not-found).
	DecisionDeny AccessDecision = "deny"
)

// Operation names what a call does.
type Operation string

// The operations a policy is asked about.
const (
	OpCreate      Operation = "create"
	OpRead        Operation = "read"
	OpComplete    Operation = "complete"
	OpAbort       Operation = "abort"
	OpDelete      Operation = "delete"
	OpUpdate      Operation = "update"
	OpAttach      Operation = "attach"
	OpDownload    Operation = "download"
	OpClone       Operation = "clone"
	OpLegacy      Operation = "legacy"
	OpPutContent  Operation = "put-content"
	OpResolveURL  Operation = "resolve-url"
	OpChangeFiles Operation = "change-files"
)

// AuthorizationRequest is what a policy sees: the trusted context, the
// resolved scope and the bounded, validated resources of the call -- never
// SQL, never more than BatchLimit ids or references.
type AuthorizationRequest struct {
	Operation  Operation
	Context    RequestContext
	Scope      Scope
	IDs        []uuid.UUID
	References []string
}

// AuthorizationPolicy decides a call. An error, a panic or a value other
// than the three decisions is DecisionDeny.
type AuthorizationPolicy func(ctx context.Context, req AuthorizationRequest) (AccessDecision, error)

// Attachment is an exact attachment of a file to a domain record.
type Attachment struct {
	Module   string
	Entity   string
	EntityID string
}

// AttachedReadRequest is what an attached-read policy sees.
type AttachedReadRequest struct {
	Context    RequestContext
	Scope      Scope
	ID         uuid.UUID
	Attachment Attachment
}

// AttachedReadPolicy approves an attached read; only (true, nil) approves.
type AttachedReadPolicy func(ctx context.Context, req AttachedReadRequest) (bool, error)

// access is the outcome of authorize: the predicates every query gets.
type access struct {
	rc    RequestContext
	scope Scope
	owner bool // the owner predicate applies
}

// sameAs reports whether a and b are one caller's access: the same scope
// under the same predicate.
func (a access) sameAs(b access) bool {
	return a.owner == b.owner && a.scope.TenantCode == b.scope.TenantCode && a.scope.UserID == b.scope.UserID &&
		(a.scope.DepartmentCode == nil) == (b.scope.DepartmentCode == nil) &&
		(a.scope.DepartmentCode == nil || *a.scope.DepartmentCode == *b.scope.DepartmentCode)
}

func (a access) ownerUserID() *string {
	if a.owner {
		return &a.scope.UserID
	}
	return nil
}

// authorize resolves the scope and asks the policy. Every failure is
// ErrNotFound, so a denied call looks like a missing resource.
func (s *Service) authorize(ctx context.Context, op Operation, ids []uuid.UUID, refs []string) (access, error) {
	rc, ok := RequestContextFrom(ctx)
	if !ok {
		return access{}, ErrNotFound
	}
	scope, err := s.resolveScope(rc)
	if err != nil || !scope.valid() {
		s.log.DebugContext(ctx, "scope unresolved or out of bounds", "op", op)
		return access{}, ErrNotFound
	}
	decision := s.decide(ctx, AuthorizationRequest{Operation: op, Context: rc, Scope: scope, IDs: ids, References: refs})
	switch decision {
	case DecisionOwner:
		return access{rc: rc, scope: scope, owner: true}, nil
	case DecisionTenant:
		return access{rc: rc, scope: scope}, nil
	default:
		return access{}, ErrNotFound
	}
}

// MaxScopeLength bounds the tenant, department and user id of a scope, in
// characters (the columns' CHECK constraints).
const MaxScopeLength = 255

// ValidScopeValue reports whether v can be a tenant, department or user id:
// valid UTF-8, not blank, at most MaxScopeLength characters, no control
// characters (NUL included).
func ValidScopeValue(v string) bool {
	if strings.TrimSpace(v) == "" || !utf8.ValidString(v) || utf8.RuneCountInString(v) > MaxScopeLength {
		return false
	}
	return !strings.ContainsFunc(v, unicode.IsControl)
}

// valid: every part of the scope is a value the database accepts, so a
// scope out of bounds fails closed (ErrNotFound) instead of as a
// constraint violation.
func (sc Scope) valid() bool {
	return ValidScopeValue(sc.TenantCode) && ValidScopeValue(sc.UserID) &&
		(sc.DepartmentCode == nil || ValidScopeValue(*sc.DepartmentCode))
}

// resolveScope runs the configured resolver, turning a panic into an error.
func (s *Service) resolveScope(rc RequestContext) (scope Scope, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("resolveScope panicked: %v", r)
		}
	}()
	return s.cfg.ResolveScope(rc)
}

// decide runs the policy; no policy is owner-only; an error, a panic or an
// unknown value is deny.
func (s *Service) decide(ctx context.Context, req AuthorizationRequest) (decision AccessDecision) {
	if s.cfg.AuthorizationPolicy == nil {
		return DecisionOwner
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.WarnContext(ctx, "authorization policy panicked; denied", "op", req.Operation)
			decision = DecisionDeny
		}
	}()
	d, err := s.cfg.AuthorizationPolicy(ctx, req)
	if err != nil {
		s.log.WarnContext(ctx, "authorization policy failed; denied", "op", req.Operation, slog.String("error", err.Error()))
		return DecisionDeny
	}
	switch d {
	case DecisionOwner, DecisionTenant:
		return d
	default:
		return DecisionDeny
	}
}

// approveAttachedRead runs the attached-read policy: absent is deny; only
// exactly (true, nil) approves; a panic is deny.
func (s *Service) approveAttachedRead(ctx context.Context, req AttachedReadRequest) (ok bool) {
	if s.cfg.AttachedReadPolicy == nil {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.WarnContext(ctx, "attached-read policy panicked; denied")
			ok = false
		}
	}()
	approved, err := s.cfg.AttachedReadPolicy(ctx, req)
	return err == nil && approved
}

// parseIDs validates and deduplicates ids: a malformed id is ErrNotFound
// (identifier failures look like absence); too many is ErrInvalidMeta.
func parseIDs(raw []string) ([]uuid.UUID, error) {
	if len(raw) == 0 || len(raw) > BatchLimit {
		return nil, ErrInvalidMeta
	}
	seen := make(map[uuid.UUID]bool, len(raw))
	out := make([]uuid.UUID, 0, len(raw))
	for _, r := range raw {
		id, err := parseID(r)
		if err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// parseID accepts only the canonical lowercase or uppercase 36-character
// form; anything else is ErrNotFound.
func parseID(raw string) (uuid.UUID, error) {
	if len(raw) != 36 {
		return uuid.Nil, ErrNotFound
	}
	id, err := uuid.Parse(raw)
	if err != nil || id == uuid.Nil {
		return uuid.Nil, ErrNotFound
	}
	return id, nil
}

// checkRefs bounds a batch of exact references: 1..BatchLimit of them, each
// 1..ReferenceMaxLength characters (ErrInvalidMeta otherwise), deduplicated.
func checkRefs(refs []string) ([]string, error) {
	if len(refs) == 0 || len(refs) > BatchLimit {
		return nil, ErrInvalidMeta
	}
	seen := make(map[string]bool, len(refs))
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if r == "" || len([]rune(r)) > ReferenceMaxLength {
			return nil, ErrInvalidMeta
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out, nil
}
