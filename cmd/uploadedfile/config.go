package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/policy"
	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/service"
)

// fileConfig is the server configuration: a YAML file whose keys are the
// spec's option names, overridden by UPLOADEDFILE_<OPTION> environment
// variables (camelCase option names in upper snake case, "__" for nesting:
// UPLOADEDFILE_LOCAL_ROOT, UPLOADEDFILE_REMOTE_CLONE__ALLOWED_HOSTS=a,b).
type fileConfig struct {
	// sources says where each key's value came from ("config file X",
	// "environment variable Y"), for error messages.
	sources map[string]string

	Listen      string `koanf:"listen"`
	DatabaseURL string `koanf:"databaseUrl"`
	Migrate     *bool  `koanf:"migrate"`
	// MetricsListen serves /metrics on its own operator listener (off when
	// empty); the public listener never serves it.
	MetricsListen string `koanf:"metricsListen"`
	// BodyReadTimeout bounds the time to read one request body, and
	// BodyIdleTimeout the time the client may send nothing while it does.
	BodyReadTimeout time.Duration `koanf:"bodyReadTimeout"`
	BodyIdleTimeout time.Duration `koanf:"bodyIdleTimeout"`
	// AccessLog writes one JSON line per request (default true).
	AccessLog *bool `koanf:"accessLog"`
	// MaxConnectionsPerClient bounds the connections one client address
	// holds open at once (0: the default, negative: no limit).
	MaxConnectionsPerClient int `koanf:"maxConnectionsPerClient"`

	// Config holds the service's keys: service.Config's koanf tags name
	// them, so they are parsed into it directly (one model, documented
	// beside its fields). The policies are CEL text here, compiled into
	// the service's at start (authorizationPolicy, attachedReadPolicy).
	service.Config `koanf:",squash"`
	// AuthorizationPolicyCEL and AttachedReadPolicyCEL are CEL
	// expressions (internal/adapter/policy): the first evaluates to
	// "owner", "tenant" or "deny", the second to a bool.
	AuthorizationPolicyCEL string `koanf:"authorizationPolicy"`
	AttachedReadPolicyCEL  string `koanf:"attachedReadPolicy"`

	Docs struct {
		// Enabled serves the API reference at /docs/ (default: only with
		// --dev).
		Enabled *bool `koanf:"enabled"`
	} `koanf:"docs"`

	CORS struct {
		// AllowedOrigins are the browser origins allowed to call the API
		// (scheme://host[:port]); none by default.
		AllowedOrigins []string `koanf:"allowedOrigins"`
	} `koanf:"cors"`

	Auth struct {
		HMACSecret string `koanf:"hmacSecret"`
		JWKSFile   string `koanf:"jwksFile"`
		JWKSURL    string `koanf:"jwksUrl"`
		Issuer     string `koanf:"issuer"`
		Audience   string `koanf:"audience"`
		// TokenCacheSize bounds the verified-token cache (0: the default,
		// negative: off).
		TokenCacheSize int `koanf:"tokenCacheSize"`
		Claims         struct {
			Tenant      string `koanf:"tenant"`
			Department  string `koanf:"department"`
			User        string `koanf:"user"`
			Roles       string `koanf:"roles"`
			Permissions string `koanf:"permissions"`
		} `koanf:"claims"`
	} `koanf:"auth"`

	// Tracing: OpenTelemetry traces over OTLP/HTTP (off without endpoint).
	Tracing struct {
		Endpoint    string `koanf:"endpoint"`
		ServiceName string `koanf:"serviceName"`
	} `koanf:"tracing"`

	// Scan: the malware scan gate (docs/operations.md).
	Scan struct {
		Clamd   string        `koanf:"clamd"`
		Mode    string        `koanf:"mode"`
		Timeout time.Duration `koanf:"timeout"`
	} `koanf:"scan"`

	// Events: the lifecycle event relay and its sinks (docs/events.md).
	Events eventsConfig `koanf:"events"`

	// Database: the bounds of every wait on PostgreSQL (pools.go).
	Database databaseConfig `koanf:"database"`
}

// eventsConfig is the events section.
type eventsConfig struct {
	// Relay runs the relay inside serve (default true; `uploadedfile
	// events relay` runs it on its own).
	Relay     *bool         `koanf:"relay"`
	Source    string        `koanf:"source"`
	Retention time.Duration `koanf:"retention"`
	Batch     int           `koanf:"batch"`
	Interval  time.Duration `koanf:"interval"`
	Lease     time.Duration `koanf:"lease"`
	// Sinks by name (the name keys the sink's progress in the database).
	Sinks map[string]sinkConfig `koanf:"sinks"`
}

// sinkConfig is one sink: exactly one of webhook and nats.
type sinkConfig struct {
	Types       []string      `koanf:"types"`
	MaxAttempts int           `koanf:"maxAttempts"`
	Backoff     time.Duration `koanf:"backoff"`
	MaxBackoff  time.Duration `koanf:"maxBackoff"`
	Webhook     struct {
		URL     string        `koanf:"url"`
		Secret  string        `koanf:"secret"`
		Timeout time.Duration `koanf:"timeout"`
	} `koanf:"webhook"`
	NATS struct {
		URL           string        `koanf:"url"`
		SubjectPrefix string        `koanf:"subjectPrefix"`
		Stream        string        `koanf:"stream"`
		Timeout       time.Duration `koanf:"timeout"`
	} `koanf:"nats"`
}

// loadConfig reads path (optional) and the environment (UPLOADEDFILE_*
// over the file). An unknown key, or a duration written without its unit,
// is an error that says where it came from (the file and its key, or the
// environment variable) -- an unknown key with the nearest known one.
func loadConfig(path string, environ func() []string) (fileConfig, error) {
	k := koanf.New(".")
	known := knownKeys(reflect.TypeFor[fileConfig](), "")
	durations := durationKeys(reflect.TypeFor[fileConfig](), "")
	sources := map[string]string{}
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return fileConfig{}, fmt.Errorf("config file %s: %w", path, err)
		}
		if err := checkKeys(fk, known, durations, func(string) string { return "config file " + path }); err != nil {
			return fileConfig{}, err
		}
		for _, key := range fk.Keys() {
			sources[key] = fmt.Sprintf("config file %s", path)
		}
		if err := k.Merge(fk); err != nil {
			return fileConfig{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	fromEnv := map[string]string{} // key -> the variable it came from
	ek := koanf.New(".")
	envOpt := env.Opt{Prefix: "UPLOADEDFILE_", EnvironFunc: environ, TransformFunc: func(name, v string) (string, any) {
		if flagOnlyEnv[name] || strings.HasPrefix(name, "UPLOADEDFILE_TEST_") {
			return "", nil // a flag's default, or the test suite's own settings: not configuration keys
		}
		key, val := envKey(name, v)
		fromEnv[key] = name
		return key, val
	}}
	if err := ek.Load(env.Provider(".", envOpt), nil); err != nil {
		return fileConfig{}, fmt.Errorf("environment: %w", err)
	}
	if err := checkKeys(ek, known, durations, func(key string) string { return "environment variable " + fromEnv[key] }); err != nil {
		return fileConfig{}, err
	}
	for key, name := range fromEnv {
		sources[key] = "environment variable " + name
	}
	if err := k.Merge(ek); err != nil {
		return fileConfig{}, fmt.Errorf("environment: %w", err)
	}
	var c fileConfig
	err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			strictDuration, mapstructure.StringToWeakSliceHookFunc(",")),
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		Result:           &c,
		TagName:          "koanf",
	}})
	if err != nil {
		return fileConfig{}, fmt.Errorf("configuration: %w", err)
	}
	c.sources = sources
	return c, nil
}

// sourceOf is where key's value came from.
func (c fileConfig) sourceOf(key string) string {
	if s, ok := c.sources[key]; ok {
		return s
	}
	return "the default"
}

// checkKeys refuses the first unknown key of kk and the first duration
// written without a unit, naming the key and where it came from (source).
func checkKeys(kk *koanf.Koanf, known, durations []string, source func(key string) string) error {
	if err := unknownKey(kk.Keys(), known, func(key string) string { return source(key) + ": unknown key " + strconv.Quote(key) }); err != nil {
		return err
	}
	keys := kk.Keys()
	sort.Strings(keys)
	for _, key := range keys {
		if !slices.ContainsFunc(durations, func(p string) bool { return keyMatches(p, key) }) {
			continue
		}
		if _, err := parseDuration(kk.Get(key)); err != nil {
			return fmt.Errorf("%s: %s: %w", source(key), key, err)
		}
	}
	return nil
}

// durationKeys lists the dotted keys of t's time.Duration fields (a * for
// a named section), as knownKeys does for every field.
func durationKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for f := range t.Fields() {
		tag := f.Tag.Get("koanf")
		switch {
		case tag == "" || tag == "-":
		case tag == ",squash":
			keys = append(keys, durationKeys(f.Type, prefix)...)
		case f.Type == reflect.TypeFor[time.Duration]():
			keys = append(keys, prefix+tag)
		case f.Type.Kind() == reflect.Struct:
			keys = append(keys, durationKeys(f.Type, prefix+tag+".")...)
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			keys = append(keys, durationKeys(f.Type.Elem(), prefix+tag+".*.")...)
		}
	}
	return keys
}

// parseDuration reads a duration as the configuration writes it: a string
// with a unit ("30s", "5m", "1h30m"). A bare number -- YAML's 5, or "5" --
// is refused: it would be 5 nanoseconds.
func parseDuration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("%v is not a duration with a unit (write 30s, 5m or 1h)", v)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration with a unit (write 30s, 5m or 1h)", s)
	}
	return d, nil
}

// strictDuration is the decode hook of time.Duration fields: parseDuration
// (never mapstructure's weak number-to-nanoseconds conversion).
func strictDuration(_ reflect.Type, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	if d, ok := data.(time.Duration); ok {
		return d, nil
	}
	return parseDuration(data)
}

// flagOnlyEnv are UPLOADEDFILE_ variables that set a flag's default rather
// than a configuration key.
var flagOnlyEnv = map[string]bool{"UPLOADEDFILE_CONFIG": true}

// knownKeys lists the dotted keys of t's koanf-tagged fields; a nested
// struct contributes its own keys under its name.
func knownKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for f := range t.Fields() {
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" {
			continue
		}
		if tag == ",squash" { // an embedded section whose keys are this level's
			keys = append(keys, knownKeys(f.Type, prefix)...)
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
			keys = append(keys, knownKeys(f.Type, prefix+tag+".")...)
			continue
		}
		if f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct {
			// A map of sections by name: any name, then the section's keys.
			keys = append(keys, knownKeys(f.Type.Elem(), prefix+tag+".*.")...)
			continue
		}
		keys = append(keys, prefix+tag)
	}
	return keys
}

// unknownKey returns an error for the first of keys not in known, in a
// stable order, with the nearest known key as a suggestion.
func unknownKey(keys, known []string, where func(key string) string) error {
	sort.Strings(keys)
	for _, key := range keys {
		if slices.ContainsFunc(known, func(k string) bool { return keyMatches(k, key) }) {
			continue
		}
		msg := where(key)
		if near := nearest(key, known); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return errors.New(msg + "; every key is listed in docs/configuration.md")
	}
	return nil
}

// keyMatches: key is the known key pattern, where a * segment stands for
// any one name.
func keyMatches(pattern, key string) bool {
	ps, ks := strings.Split(pattern, "."), strings.Split(key, ".")
	if len(ps) != len(ks) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != ks[i] {
			return false
		}
	}
	return true
}

// fillPattern puts key's names in the * segments of pattern (when both have
// as many segments), so a typo inside a named section is measured against
// the section's keys.
func fillPattern(pattern, key string) string {
	ps, ks := strings.Split(pattern, "."), strings.Split(key, ".")
	if len(ps) != len(ks) {
		return pattern
	}
	for i := range ps {
		if ps[i] == "*" {
			ps[i] = ks[i]
		}
	}
	return strings.Join(ps, ".")
}

// nearest is the known key closest to key by edit distance (ignoring
// case), or "" when none is close enough to be a likely typo.
func nearest(key string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		k = fillPattern(k, key)
		d := editDistance(strings.ToLower(key), strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > max(2, len(key)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// envKey maps UPLOADEDFILE_REMOTE_CLONE__ALLOWED_HOSTS to remoteClone.allowedHosts.
func envKey(k, v string) (string, any) {
	k = strings.TrimPrefix(k, "UPLOADEDFILE_")
	parts := strings.Split(k, "__")
	for i, p := range parts {
		words := strings.Split(strings.ToLower(p), "_")
		for j := 1; j < len(words); j++ {
			if words[j] != "" {
				r := []rune(words[j])
				r[0] = unicode.ToUpper(r[0])
				words[j] = string(r)
			}
		}
		parts[i] = strings.Join(words, "")
	}
	return strings.Join(parts, "."), v
}

func lookup(environ func() []string, name string) string {
	for _, kv := range environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// serviceConfig maps the file's options onto service.Config, compiling the
// policy expressions (a bad one is an error naming its option).
func (c fileConfig) serviceConfig() (service.Config, error) {
	sc := c.Config
	sc.ScanMode = c.Scan.Mode
	var err error
	if c.AuthorizationPolicyCEL != "" {
		if sc.AuthorizationPolicy, err = policy.Authorization(c.AuthorizationPolicyCEL); err != nil {
			return service.Config{}, err
		}
	}
	if c.AttachedReadPolicyCEL != "" {
		if sc.AttachedReadPolicy, err = policy.AttachedRead(c.AttachedReadPolicyCEL); err != nil {
			return service.Config{}, err
		}
	}
	return sc, nil
}

// authConfig maps the auth section.
func (c fileConfig) authConfig(log *slog.Logger) (httpapi.AuthConfig, error) {
	a := c.Auth
	if a.HMACSecret == "" && a.JWKSFile == "" && a.JWKSURL == "" {
		return httpapi.AuthConfig{}, errors.New("auth: configure auth.hmacSecret, auth.jwksFile or auth.jwksUrl (or run with --dev)")
	}
	return httpapi.AuthConfig{
		HMACSecret: []byte(a.HMACSecret), JWKSFile: a.JWKSFile, JWKSURL: a.JWKSURL, Issuer: a.Issuer, Audience: a.Audience, TokenCacheSize: a.TokenCacheSize, Logger: log,
		Claims: httpapi.ClaimNames{Tenant: a.Claims.Tenant, Department: a.Claims.Department, User: a.Claims.User, Roles: a.Claims.Roles, Permissions: a.Claims.Permissions},
	}, nil
}

// scanner builds the scanner from scan.clamd (none when it is not set;
// the gate and rescans use it). With checkLimit it first makes sure clamd is there and would
// scan a file of the largest size the service accepts whole: a clamd whose
// StreamMaxLength is shorter refuses to start the service, since every
// scan of a larger file would fail (or, with another client, be cut).
func (c fileConfig) scanner(ctx context.Context, maxFileSize int64, checkLimit bool) ([]service.Option, error) {
	gate := c.Scan.Mode == service.ScanGate
	if c.Scan.Clamd == "" {
		if gate {
			return nil, errors.New("scan.mode gate needs scan.clamd (tcp://host:3310 or unix:///run/clamav/clamd.ctl)")
		}
		return nil, nil
	}
	client, err := clamd.New(c.Scan.Clamd, c.Scan.Timeout)
	if err != nil {
		return nil, fmt.Errorf("scan.clamd: %w", err)
	}
	if checkLimit && gate {
		if err := client.CheckStreamLimit(ctx, maxFileSize); err != nil {
			if errors.Is(err, clamd.ErrSizeLimit) {
				return nil, fmt.Errorf("scan.clamd: clamd's StreamMaxLength is below maxFileSizeBytes (%d): raise StreamMaxLength in clamd.conf, or lower maxFileSizeBytes", maxFileSize)
			}
			return nil, fmt.Errorf("scan.clamd: %w", err)
		}
	}
	return []service.Option{service.WithScanner(func(ctx context.Context, r io.Reader) (service.ScanVerdict, error) {
		v, err := client.Scan(ctx, r)
		return service.ScanVerdict{Infected: v.Infected, Unscannable: v.Unscannable, Signature: v.Signature}, err
	})}, nil
}

// maxConnectionsPerClient is maxConnectionsPerClient with its default
// applied (0: httpapi.DefaultMaxConnectionsPerClient; negative: no limit).
func (c fileConfig) maxConnectionsPerClient() int {
	if c.MaxConnectionsPerClient == 0 {
		return httpapi.DefaultMaxConnectionsPerClient
	}
	return c.MaxConnectionsPerClient
}
