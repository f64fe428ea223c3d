package httpapi

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/uploadedfile/uploadedfile/service"
)

// HostScope is the scope a token needs for the host routes.
const HostScope = "uploaded-file:host"

// MaxTokenBytes bounds a bearer token before anything decodes it: a longer
// one is 401 core.auth.token-too-large. Its claims are bounded with it (a
// token carries them base64-encoded), and so is what the verified-token
// cache keeps for it.
const MaxTokenBytes = 8 << 10

// ClaimNames names the token claims the guard reads.
type ClaimNames struct {
	Tenant      string // default "tenant"
	Department  string // default "department"
	User        string // default "sub"
	Roles       string // default "roles"
	Permissions string // default "permissions"
	Scope       string // default "scope" (space-separated) -- "scp" (a list) is read too
}

// AuthConfig configures the bearer-token guard. Exactly one key source:
// an HMAC secret (development), a JWKS file, or a JWKS URL.
type AuthConfig struct {
	HMACSecret []byte
	JWKSFile   string
	JWKSURL    string
	Issuer     string
	Audience   string
	Claims     ClaimNames
	// Leeway tolerated on exp/nbf; default 30 s.
	Leeway time.Duration
	// TokenCacheSize bounds the cache of verified tokens (a client reusing
	// its token pays the signature once); 0: DefaultTokenCacheSize,
	// negative: no cache.
	TokenCacheSize int
	// JWKSRefreshMin is the shortest time between two fetches of a JWKS URL
	// asked for by a token of an unknown kid, or by the retries of a key
	// set that could not be loaded (default 5 s).
	JWKSRefreshMin time.Duration
	// Logger receives every refusal with its reason (never the token) and
	// the JWKS fetch failures (default slog.Default()).
	Logger *slog.Logger
}

// Guard verifies bearer tokens and puts the trusted RequestContext in the
// request's context.
type Guard struct {
	cfg     AuthConfig
	log     *slog.Logger
	keyfunc jwt.Keyfunc
	parser  *jwt.Parser
	close   func()
	cache   *tokenCache      // nil: every token is verified
	jwks    jwkset.Storage   // the key set of a JWKS source, for the cache's rotation check
	now     func() time.Time // the cache's clock
	tracer  trace.Tracer     // nil: no span
}

// NewGuard validates cfg and loads its keys. A JWKS URL is refreshed in the
// background until Close.
func NewGuard(ctx context.Context, cfg AuthConfig) (*Guard, error) {
	c := &cfg.Claims
	for p, def := range map[*string]string{&c.Tenant: "tenant", &c.Department: "department", &c.User: "sub", &c.Roles: "roles", &c.Permissions: "permissions", &c.Scope: "scope"} {
		if *p == "" {
			*p = def
		}
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = 30 * time.Second
	}
	g := &Guard{cfg: cfg, close: func() {}, now: time.Now, log: cmp.Or(cfg.Logger, slog.Default())}
	if cfg.TokenCacheSize >= 0 {
		g.cache = newTokenCache(cmp.Or(cfg.TokenCacheSize, DefaultTokenCacheSize), TokenCacheBytes)
	}
	opts := []jwt.ParserOption{jwt.WithLeeway(cfg.Leeway), jwt.WithExpirationRequired()}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	sources := 0
	for _, set := range []bool{len(cfg.HMACSecret) > 0, cfg.JWKSFile != "", cfg.JWKSURL != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return nil, errors.New("auth: configure exactly one of auth.hmacSecret, auth.jwksFile, auth.jwksUrl")
	}
	switch {
	case len(cfg.HMACSecret) > 0:
		if len(cfg.HMACSecret) < 32 {
			return nil, errors.New("auth.hmacSecret: at least 32 bytes")
		}
		secret := cfg.HMACSecret
		g.keyfunc = func(*jwt.Token) (any, error) { return secret, nil }
		opts = append(opts, jwt.WithValidMethods([]string{"HS256", "HS384", "HS512"}))
	case cfg.JWKSFile != "":
		raw, err := os.ReadFile(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("auth.jwksFile: %w", err)
		}
		kf, err := keyfunc.NewJWKSetJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("auth.jwksFile: %w", err)
		}
		g.keyfunc, g.jwks = kf.Keyfunc, kf.Storage()
		opts = append(opts, jwt.WithValidMethods([]string{"RS256", "ES256", "EdDSA"}))
	default:
		if err := g.remoteKeys(ctx); err != nil {
			return nil, err
		}
		opts = append(opts, jwt.WithValidMethods([]string{"RS256", "ES256", "EdDSA"}))
	}
	g.parser = jwt.NewParser(opts...)
	return g, nil
}

// Close stops a JWKS refresh.
func (g *Guard) Close() { g.close() }

// remoteKeys sets g up to verify with the key set at cfg.JWKSURL: fetched
// within 5 s, refreshed every 15 minutes, again at once (at most every
// JWKSRefreshMin) for a token of an unknown kid, and, while no key set could
// be loaded, retried every JWKSRefreshMin -- never the library's five
// minutes of 401s. A request waits for a refresh at most 2 s. Fetch
// failures go to the JSON log, the URL without its query.
func (g *Guard) remoteKeys(ctx context.Context) error {
	every := cmp.Or(g.cfg.JWKSRefreshMin, 5*time.Second)
	shown := g.cfg.JWKSURL
	if u, err := url.Parse(shown); err == nil {
		u.RawQuery, u.User = "", nil
		shown = u.String()
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	remote, err := jwkset.NewStorageFromHTTP(g.cfg.JWKSURL, jwkset.HTTPClientStorageOptions{
		Ctx:                       kctx,
		HTTPTimeout:               5 * time.Second,
		NoErrorReturnFirstHTTPReq: true,
		RefreshInterval:           15 * time.Minute,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			g.log.WarnContext(ctx, "JWKS fetch failed", "url", shown, "error", err.Error())
		},
	})
	if err != nil {
		cancel()
		return fmt.Errorf("auth.jwksUrl: %w", err)
	}
	// The fetched set is read first (PrioritizeHTTP): the client's own
	// set of given keys is empty, and a read that missed it first would
	// build an error for every cached token's key check.
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{g.cfg.JWKSURL: remote},
		PrioritizeHTTP:    true,
		RateLimitWaitMax:  2 * time.Second,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(every), 1),
	})
	if err != nil {
		cancel()
		return fmt.Errorf("auth.jwksUrl: %w", err)
	}
	kf, err := keyfunc.New(keyfunc.Options{Ctx: kctx, Storage: client})
	if err != nil {
		cancel()
		return fmt.Errorf("auth.jwksUrl: %w", err)
	}
	g.keyfunc, g.close, g.jwks = g.kidlessFallback(kf.Keyfunc), cancel, kf.Storage()
	go g.retryUntilLoaded(kctx, every)
	return nil
}

// retryUntilLoaded asks for the key set every period until one is loaded
// (a read of an unknown kid makes the client fetch, within its limiter).
func (g *Guard) retryUntilLoaded(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for g.Ready(ctx) != nil {
		_, _ = g.jwks.KeyRead(ctx, "uploadedfile-key-set-probe")
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	g.log.InfoContext(ctx, "JWKS loaded")
}

// kidlessFallback is kf, but a token whose kid is in no key may be verified
// by the key set's keys that have no kid (a JWKS of one key often omits
// it): those keys are the ones such a token could have been signed with.
func (g *Guard) kidlessFallback(kf jwt.Keyfunc) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		key, err := kf(t)
		if err == nil || !errors.Is(err, jwkset.ErrKeyNotFound) {
			return key, err
		}
		all, rerr := g.jwks.KeyReadAll(context.Background())
		if rerr != nil {
			return nil, err
		}
		var set jwt.VerificationKeySet
		for _, k := range all {
			if k.Marshal().KID == "" {
				set.Keys = append(set.Keys, k.Key())
			}
		}
		if len(set.Keys) == 0 {
			return nil, err
		}
		return set, nil
	}
}

// Ready reports whether the guard can verify tokens: with a JWKS URL, a key
// set has been loaded (at least one key); an HMAC secret or a JWKS file is
// always ready.
func (g *Guard) Ready(ctx context.Context) error {
	if g.cfg.JWKSURL == "" || g.jwks == nil {
		return nil
	}
	keys, err := g.jwks.KeyReadAll(ctx)
	if err != nil || len(keys) == 0 {
		return &NotReady{Cause: "no key set loaded from auth.jwksUrl", Err: err}
	}
	return nil
}

// clone copies the identity's maps and lists, so no two requests share
// them (a cached identity serves many).
func (id identity) clone() identity {
	id.rc.Roles = slices.Clone(id.rc.Roles)
	id.rc.Permissions = slices.Clone(id.rc.Permissions)
	id.rc.Custom = maps.Clone(id.rc.Custom)
	return id
}

// errBadClaims: a verified token whose tenant, user or department claim is
// not a value a scope can hold (too long, blank, not UTF-8, control
// characters, not a string).
var errBadClaims = errors.New("token claims out of bounds")

// errTokenTooLarge: a bearer token longer than MaxTokenBytes, refused
// before it is decoded.
var errTokenTooLarge = errors.New("token too large")

// identity is a verified token's trusted context and its host scope.
type identity struct {
	rc   service.RequestContext
	host bool
}

// verify checks a bearer token: from the cache when this very token was
// verified before, is not past its exp and its key is still current;
// otherwise by its signature and claims, remembering it.
func (g *Guard) verify(ctx context.Context, raw string) (identity, error) {
	sum := sha256.Sum256([]byte(raw))
	if g.cache != nil {
		if t, ok := g.cache.get(sum, g.now()); ok {
			if g.keyStillValid(ctx, t) {
				return t.id.clone(), nil
			}
			g.cache.drop(sum)
		}
	}
	var kid string
	var key any
	keyfunc := func(t *jwt.Token) (any, error) {
		kid, _ = t.Header["kid"].(string)
		k, err := g.keyfunc(t)
		key = k
		return k, err
	}
	claims := jwt.MapClaims{}
	if _, err := g.parser.ParseWithClaims(raw, claims, keyfunc); err != nil {
		return identity{}, err
	}
	id, err := g.identityOf(claims)
	if err != nil {
		return identity{}, err
	}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil && g.cache != nil {
		if g.jwks == nil {
			key = nil // an HMAC secret or a static file: nothing rotates
		}
		g.cache.put(sum, len(raw), cachedToken{id: id.clone(), exp: exp.Time, kid: kid, key: key})
	}
	return id, nil
}

// keyStillValid: a cached token's key is still the key set's (JWKS: the
// same key under the same kid; a rotated-out key fails, so its tokens are
// verified again -- and refused).
func (g *Guard) keyStillValid(ctx context.Context, t cachedToken) bool {
	if g.jwks == nil {
		return true
	}
	jwk, err := g.jwks.KeyRead(ctx, t.kid)
	return err == nil && sameKey(jwk.Key(), t.key)
}

// identityOf is the trusted context and host scope of verified claims.
func (g *Guard) identityOf(claims jwt.MapClaims) (identity, error) {
	c := g.cfg.Claims
	rc := service.RequestContext{
		Tenant:      str(claims[c.Tenant]),
		UserID:      str(claims[c.User]),
		Roles:       strs(claims[c.Roles]),
		Permissions: strs(claims[c.Permissions]),
		Custom:      map[string]any{},
	}
	if rc.Tenant == "" || rc.UserID == "" {
		return identity{}, errors.New("token has no tenant or user claim")
	}
	if !service.ValidScopeValue(rc.Tenant) || !service.ValidScopeValue(rc.UserID) || !validDepartment(claims[c.Department]) {
		return identity{}, errBadClaims
	}
	for k, v := range claims {
		if !slices.Contains([]string{c.Tenant, c.User, c.Roles, c.Permissions}, k) {
			rc.Custom[k] = v
		}
	}
	if d := str(claims[c.Department]); d != "" {
		rc.Custom["departmentCode"] = d
	}
	scopes := append(strings.Fields(str(claims[c.Scope])), strs(claims["scp"])...)
	return identity{rc: rc, host: slices.Contains(scopes, HostScope)}, nil
}

// signedContentPut: a PUT to a local upload target that carries its own
// signature (the service checks it before reading a byte): no token.
func signedContentPut(r *http.Request) bool {
	if r.Method != http.MethodPut || !service.IsSigned(r.URL.Query()) {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/uploaded-file/")
	id, tail, _ := strings.Cut(rest, "/")
	return ok && id != "" && tail == "content"
}

// validDepartment: the department claim is absent, empty (no department),
// or a string a scope can hold -- never another type, which would silently
// drop the department boundary.
func validDepartment(v any) bool {
	if v == nil {
		return true
	}
	d, ok := v.(string)
	return ok && (d == "" || service.ValidScopeValue(d))
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func strs(v any) []string {
	switch t := v.(type) {
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case string:
		return strings.Fields(t)
	}
	return nil
}

// traced is verify inside a "guard" span when tracing is on.
func (g *Guard) traced(ctx context.Context, raw string) (identity, error) {
	if g.tracer == nil {
		return g.verify(ctx, raw)
	}
	ctx, span := g.tracer.Start(ctx, "guard")
	defer span.End()
	id, err := g.verify(ctx, raw)
	if err != nil {
		span.SetStatus(codes.Error, "token refused")
	}
	return id, err
}

// Middleware protects every route but the health checks: a missing or
// invalid token is 401 with WWW-Authenticate; a host route without the host
// scope is 404 like any unreachable resource.
func (g *Guard) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || signedContentPut(r) {
			next.ServeHTTP(w, r)
			return
		}
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		raw = strings.TrimSpace(raw)
		var id identity
		err := errTokenTooLarge
		if len(raw) <= MaxTokenBytes {
			id, err = g.traced(r.Context(), raw)
		}
		if !ok || err != nil {
			// The body of a refused request is never read: the connection
			// is closed after the answer instead of drained (a read
			// deadline in the past makes the server's own drain give up
			// at once).
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			reason := refusal(ok, err)
			if ok && g.Ready(r.Context()) != nil {
				// No key set could be loaded: the token may be good, the
				// keys to tell are missing -- not the caller's fault.
				g.log.WarnContext(r.Context(), "token not verified: no key set loaded", "reason", reason)
				retryable := true
				writeDetailedProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: codeKeysUnavailable, Retryable: &retryable})
				return
			}
			g.log.InfoContext(r.Context(), "token refused", "reason", reason)
			w.Header().Set("WWW-Authenticate", `Bearer realm="uploadedfile", error="invalid_token"`)
			code := codeUnauthorized
			switch {
			case errors.Is(err, errBadClaims):
				code = codeInvalidClaims
			case errors.Is(err, errTokenTooLarge):
				code = codeTokenTooLarge
			}
			writeProblem(w, r, http.StatusUnauthorized, code)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/internal/") && !id.host {
			writeProblem(w, r, http.StatusNotFound, service.ErrNotFound.Code)
			return
		}
		next.ServeHTTP(w, r.WithContext(service.WithRequestContext(r.Context(), id.rc)))
	})
}

// refusal is why a token was refused, for the log: never the token.
func refusal(present bool, err error) string {
	switch {
	case !present:
		return "no bearer token"
	case errors.Is(err, errTokenTooLarge):
		return "token too large"
	case errors.Is(err, errBadClaims):
		return "claims out of bounds"
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return "unknown kid"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "audience"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "signature"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "required claim missing"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unverifiable (algorithm or key)"
	}
	return "invalid"
}
