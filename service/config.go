package service

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
	"github.com/uploadedfile/uploadedfile/internal/objectkey"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
)

// Visibility is 'public' or 'private'.
type Visibility string

// The visibilities.
const (
	Public  Visibility = "public"
	Private Visibility = "private"
)

// Disposition is 'inline' or 'attachment'.
type Disposition string

// The dispositions.
const (
	DispositionInline     Disposition = "inline"
	DispositionAttachment Disposition = "attachment"
)

// Drivers: the storage package's kinds, as the configuration names them.
const (
	DriverLocal = string(storage.KindLocal)
	DriverS3    = string(storage.KindS3)
)

// Limits and defaults of the documented Limits table.
const (
	MaxURLLifetime                      = time.Hour
	DefaultUploadURLTTLSeconds          = 600
	DefaultResumableUploadTTLSeconds    = 86400
	MaxResumableUploadTTLSeconds        = 7 * 86400
	DefaultPrivateDownloadURLTTLSeconds = 900
	DefaultMaxPrivateDownloadURLTTL     = 3600
	DefaultPendingCleanupInterval       = "0 3 * * *"
	DefaultTemporaryCleanupInterval     = "*/15 * * * *"
	DefaultReconcileGrace               = 24 * time.Hour
	MaxCleanupBatchSize                 = 100
	DefaultDownloadPath                 = "uploaded-file"
	TemporaryLifetime                   = 24 * time.Hour
	ActivationLease                     = 30 * time.Second
	DeletionRetryBackoff                = time.Minute
	DefaultStorageTimeout               = 10 * time.Second
	deletionLease                       = 5 * time.Minute
	completionLease                     = 30 * time.Second
	directCleanupGrace                  = time.Hour
	targetClockSkew                     = 15 * time.Minute
	defaultRemoteCloneTimeout           = 5 * time.Second
	defaultRemoteCloneRedirects         = 3
	maxRemoteCloneRedirects             = 5
	PublicAccessModeExternal            = s3store.PublicAccessExternal
	PublicAccessModeObjectACL           = s3store.PublicAccessObjectACL
	maxMetaLength                       = 255
	maxExtraDataBytes                   = MaxExtraDataBytes
)

// RemoteCloneConfig controls cloneFromUrl.
type RemoteCloneConfig struct {
	Enabled bool `koanf:"enabled"`
	// Timeout of the whole exchange; default 5 s.
	Timeout time.Duration `koanf:"timeout"`
	// MaxBytes; default and ceiling: the service's file size limit.
	MaxBytes int64 `koanf:"maxBytes"`
	// MaxRedirects; default 3, at most 5.
	MaxRedirects *int `koanf:"maxRedirects"`
	// AllowedHosts is an optional exact host name allowlist.
	AllowedHosts []string `koanf:"allowedHosts"`
	// AllowedPorts adds ports to 80 and 443.
	AllowedPorts []int `koanf:"allowedPorts"`
}

// QuotaConfig is the default storage quota (quota.*): bytes and files per
// tenant and per owner within a tenant; 0 is unlimited, a negative value is
// refused.
type QuotaConfig struct {
	TenantBytes int64 `koanf:"tenantBytes"`
	TenantFiles int64 `koanf:"tenantFiles"`
	OwnerBytes  int64 `koanf:"ownerBytes"`
	OwnerFiles  int64 `koanf:"ownerFiles"`
}

// Config is the service's configuration: every option of docs/configuration.md.
// Zero values mean the documented default.
type Config struct {
	// Driver is "local" or "s3"; empty: s3 when a complete AccessID +
	// AccessKey pair is given, local otherwise.
	Driver string `koanf:"driver"`
	// AccessID and AccessKey: optional, only together, nonblank.
	AccessID  string `koanf:"accessId"`
	AccessKey string `koanf:"accessKey"`
	// Region: empty uses the SDK's provider chain.
	Region string `koanf:"region"`
	// Endpoint: optional S3-compatible origin.
	Endpoint string `koanf:"endpoint"`
	// ForcePathStyle: path-style bucket addressing.
	ForcePathStyle bool `koanf:"forcePathStyle"`
	// Bucket: required for s3.
	Bucket string `koanf:"bucket"`
	// StorageTimeout bounds each S3 attempt's wait for the store: the
	// connection (at most 5 s of it), the answer's first byte, and any
	// pause in reading or writing a body. Default DefaultStorageTimeout; the
	// client makes up to three attempts of a call that can be repeated.
	StorageTimeout time.Duration `koanf:"storageTimeout"`
	// Folder: key prefix, default "core"; normalized, traversal refused.
	Folder string `koanf:"folder"`
	// LocalRoot: default <cwd>/upload; made canonical and absolute.
	LocalRoot string `koanf:"localRoot"`
	// Host: base URL for authenticated private URLs (e.g. https://files.example.com).
	Host string `koanf:"host"`
	// CDNBaseURL: stable public read base; never the presigned PUT origin.
	CDNBaseURL string `koanf:"cdnBaseUrl"`
	// DefaultVisibility of managed uploads; default private.
	DefaultVisibility Visibility `koanf:"defaultVisibility"`
	// AllowPublicUploads must be true before callers may ask for public.
	AllowPublicUploads bool `koanf:"allowPublicUploads"`
	// PublicAccessMode: "external" (default) or "object-acl".
	PublicAccessMode string `koanf:"publicAccessMode"`
	// PublicFiles is the deprecated compatibility switch: true makes
	// permanent uploads public by default and allows public uploads; it
	// never makes a temporary file public.
	PublicFiles *bool `koanf:"publicFiles"`
	// UploadURLTTLSeconds: default 600, at most 3600.
	UploadURLTTLSeconds int `koanf:"uploadUrlTtlSeconds"`
	// ResumableUploadTTLSeconds: how long a resumable upload can be
	// resumed after it is created; default 86400, at most 604800.
	ResumableUploadTTLSeconds int `koanf:"resumableUploadTtlSeconds"`
	// PrivateDownloadURLTTLSeconds: default 900, at most the maximum below.
	PrivateDownloadURLTTLSeconds int `koanf:"privateDownloadUrlTtlSeconds"`
	// MaxPrivateDownloadURLTTLSeconds: default 3600, at most 3600.
	MaxPrivateDownloadURLTTLSeconds int `koanf:"maxPrivateDownloadUrlTtlSeconds"`
	// PendingCleanupInterval: cron, default "0 3 * * *".
	PendingCleanupInterval string `koanf:"pendingCleanupInterval"`
	// TemporaryCleanupInterval: cron, default "*/15 * * * *".
	TemporaryCleanupInterval string `koanf:"temporaryCleanupInterval"`
	// ReconcileInterval: cron of the reconcile track; empty (the default)
	// leaves it off.
	ReconcileInterval string `koanf:"reconcileInterval"`
	// ReconcileGrace: objects younger than this are never reported or
	// repaired by the reconcile track; default 24 hours.
	ReconcileGrace time.Duration `koanf:"reconcileGrace"`
	// ReconcileRepair: the reconcile track deletes orphans and staging
	// leftovers (through durable claims) instead of only reporting them.
	ReconcileRepair bool `koanf:"reconcileRepair"`
	// CleanupBatchSize: default 100, capped at 100.
	CleanupBatchSize int `koanf:"cleanupBatchSize"`
	// DownloadPath: default "uploaded-file".
	DownloadPath string `koanf:"downloadPath"`
	// MaxFileSizeBytes: default 10 MiB, clamped to 25 MiB.
	MaxFileSizeBytes int64 `koanf:"maxFileSizeBytes"`
	// AllowedMIMETypes: default the documented twelve types.
	AllowedMIMETypes []string `koanf:"allowedMimeTypes"`
	// ValidateMagicBytes: default true.
	ValidateMagicBytes *bool `koanf:"validateMagicBytes"`
	// RemoteClone: disabled by default.
	RemoteClone RemoteCloneConfig `koanf:"remoteClone"`
	// CleanupAfterDays: legacy unused-row age purge; 0 disables it.
	CleanupAfterDays int `koanf:"cleanupAfterDays"`
	// ScanMode is ScanOff (the default) or ScanGate: no file becomes
	// visible before a clean scan by the scanner WithScanner installs.
	ScanMode string `koanf:"-"`
	// Quota: the default limits on what a tenant and each of its owners
	// may hold (per-tenant overrides live in the database); 0, the
	// default, is unlimited.
	Quota QuotaConfig `koanf:"quota"`
	// Variants: image variant presets (none by default).
	Variants VariantsConfig `koanf:"variants"`

	// ResolveScope: default DefaultResolveScope.
	ResolveScope func(RequestContext) (Scope, error) `koanf:"-"`
	// AuthorizationPolicy: nil is owner-only.
	AuthorizationPolicy AuthorizationPolicy `koanf:"-"`
	// AttachedReadPolicy: nil denies every attached read.
	AttachedReadPolicy AttachedReadPolicy `koanf:"-"`

	// SpoolDir holds buffer uploads while they are checked when the store
	// cannot spool them itself (S3); default os.TempDir(). The local driver
	// spools into unnamed files in LocalRoot and links them into place.
	SpoolDir string `koanf:"spoolDir"`
}

// resolved is a validated Config with its derived values.
type resolved struct {
	Config
	given               Config // as configured, before defaults and bounds
	policy              filecheck.Policy
	uploadURLTTL        time.Duration
	resumableTTL        time.Duration
	privateDownloadTTL  time.Duration
	remoteCloneMaxBytes int64
	remoteRedirects     int
	eagerPresets        []string            // the variant presets marked eager, in name order
	variantEngine       imagevariant.Engine // the engine variants are made on
}

// configError names the option at fault.
func configError(option, format string, args ...any) error {
	return fmt.Errorf("uploadedfile config: %s: %s", option, fmt.Sprintf(format, args...))
}

// resolve validates and normalizes c (the documented rules and bounds).
func resolve(c Config) (resolved, error) {
	r := resolved{Config: c, given: c}
	if err := r.resolveStorage(); err != nil {
		return resolved{}, err
	}
	if err := r.resolveVisibility(); err != nil {
		return resolved{}, err
	}
	if err := r.resolveTTLs(); err != nil {
		return resolved{}, err
	}
	if err := r.resolveSweeps(); err != nil {
		return resolved{}, err
	}
	if err := r.resolveURLs(); err != nil {
		return resolved{}, err
	}
	switch r.ScanMode {
	case "":
		r.ScanMode = ScanOff
	case ScanOff, ScanGate:
	default:
		return resolved{}, configError("scan.mode", "%q: want off or gate", c.ScanMode)
	}
	if q := c.Quota; q.TenantBytes < 0 || q.TenantFiles < 0 || q.OwnerBytes < 0 || q.OwnerFiles < 0 {
		return resolved{}, errors.New("uploadedfile config: quota limits are 0 (unlimited) or positive")
	}
	if err := r.resolveVariants(); err != nil {
		return resolved{}, err
	}
	validate := true
	if c.ValidateMagicBytes != nil {
		validate = *c.ValidateMagicBytes
	}
	policy, err := filecheck.NewPolicy(c.AllowedMIMETypes, c.MaxFileSizeBytes, validate)
	if err != nil {
		return resolved{}, fmt.Errorf("uploadedfile config: %w", err) // names allowedMimeTypes or maxFileSizeBytes
	}
	r.policy = policy
	r.MaxFileSizeBytes = policy.MaxFileSizeBytes
	if err := r.resolveRemoteClone(); err != nil {
		return resolved{}, err
	}
	if r.ResolveScope == nil {
		r.ResolveScope = DefaultResolveScope
	}
	if r.SpoolDir == "" {
		r.SpoolDir = os.TempDir()
	}
	if r.StorageTimeout < 0 {
		return resolved{}, configError("storageTimeout", "must not be negative")
	}
	if r.StorageTimeout == 0 {
		r.StorageTimeout = DefaultStorageTimeout
	}
	return r, nil
}

func (r *resolved) resolveStorage() error {
	if (r.AccessID == "") != (r.AccessKey == "") {
		return configError("accessId/accessKey", "must be given together")
	}
	if r.AccessID != "" && (strings.TrimSpace(r.AccessID) == "" || strings.TrimSpace(r.AccessKey) == "") {
		return configError("accessId/accessKey", "must not be blank")
	}
	switch r.Driver {
	case "":
		r.Driver = DriverLocal
		if r.AccessID != "" {
			r.Driver = DriverS3
		}
	case DriverLocal, DriverS3:
	default:
		return configError("driver", "%q: want local or s3", r.Driver)
	}
	if r.Driver == DriverS3 && strings.TrimSpace(r.Bucket) == "" {
		return configError("bucket", "required for the s3 driver")
	}
	switch r.PublicAccessMode {
	case "":
		r.PublicAccessMode = PublicAccessModeExternal
	case PublicAccessModeExternal, PublicAccessModeObjectACL:
	default:
		return configError("publicAccessMode", "%q: want external or object-acl", r.PublicAccessMode)
	}
	folder, err := objectkey.NormalizeFolder(r.Folder)
	if err != nil {
		return configError("folder", "%v", err)
	}
	r.Folder = folder
	if r.Driver == DriverLocal {
		root := r.LocalRoot
		if root == "" {
			wd, err := os.Getwd()
			if err != nil {
				return configError("localRoot", "no working directory: %v", err)
			}
			root = filepath.Join(wd, "upload")
		}
		abs, err := filepath.Abs(root)
		if err != nil {
			return configError("localRoot", "%v", err)
		}
		r.LocalRoot = abs
	}
	return nil
}

func (r *resolved) resolveVisibility() error {
	if r.PublicFiles != nil && *r.PublicFiles {
		// Deprecated compatibility: permanent uploads public by default and
		// allowed; temporary files stay private whatever this says.
		r.AllowPublicUploads = true
		if r.DefaultVisibility == "" {
			r.DefaultVisibility = Public
		}
	}
	switch r.DefaultVisibility {
	case "":
		r.DefaultVisibility = Private
	case Private:
	case Public:
		if !r.AllowPublicUploads {
			return configError("defaultVisibility", "public needs allowPublicUploads")
		}
	default:
		return configError("defaultVisibility", "%q: want public or private", r.DefaultVisibility)
	}
	return nil
}

func (r *resolved) resolveTTLs() error {
	seconds := func(option string, v, def, max int) (int, error) {
		switch {
		case v == 0:
			return def, nil
		case v < 0:
			return 0, configError(option, "must be a positive number of seconds")
		case v > max:
			return max, nil
		}
		return v, nil
	}
	var err error
	if r.UploadURLTTLSeconds, err = seconds("uploadUrlTtlSeconds", r.UploadURLTTLSeconds, DefaultUploadURLTTLSeconds, 3600); err != nil {
		return err
	}
	if r.MaxPrivateDownloadURLTTLSeconds, err = seconds("maxPrivateDownloadUrlTtlSeconds", r.MaxPrivateDownloadURLTTLSeconds, DefaultMaxPrivateDownloadURLTTL, 3600); err != nil {
		return err
	}
	def := min(DefaultPrivateDownloadURLTTLSeconds, r.MaxPrivateDownloadURLTTLSeconds)
	if r.PrivateDownloadURLTTLSeconds, err = seconds("privateDownloadUrlTtlSeconds", r.PrivateDownloadURLTTLSeconds, def, r.MaxPrivateDownloadURLTTLSeconds); err != nil {
		return err
	}
	if r.ResumableUploadTTLSeconds, err = seconds("resumableUploadTtlSeconds", r.ResumableUploadTTLSeconds, DefaultResumableUploadTTLSeconds, MaxResumableUploadTTLSeconds); err != nil {
		return err
	}
	r.uploadURLTTL = time.Duration(r.UploadURLTTLSeconds) * time.Second
	r.resumableTTL = time.Duration(r.ResumableUploadTTLSeconds) * time.Second
	r.privateDownloadTTL = time.Duration(r.PrivateDownloadURLTTLSeconds) * time.Second
	return nil
}

// ScheduleParser reads the tracks' cron expressions (pendingCleanupInterval,
// temporaryCleanupInterval, reconcileInterval): five fields, minute to
// weekday, or a descriptor (@daily, @every 1h). New validates them with it
// and the scheduler runs them with it, so what is accepted is what runs.
func ScheduleParser() cron.Parser {
	return cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

func (r *resolved) resolveSweeps() error {
	parser := ScheduleParser()
	if r.PendingCleanupInterval == "" {
		r.PendingCleanupInterval = DefaultPendingCleanupInterval
	}
	if _, err := parser.Parse(r.PendingCleanupInterval); err != nil {
		return configError("pendingCleanupInterval", "%q is not a cron expression: %v", r.PendingCleanupInterval, err)
	}
	if r.TemporaryCleanupInterval == "" {
		r.TemporaryCleanupInterval = DefaultTemporaryCleanupInterval
	}
	if _, err := parser.Parse(r.TemporaryCleanupInterval); err != nil {
		return configError("temporaryCleanupInterval", "%q is not a cron expression: %v", r.TemporaryCleanupInterval, err)
	}
	if r.ReconcileInterval != "" {
		if _, err := parser.Parse(r.ReconcileInterval); err != nil {
			return configError("reconcileInterval", "%q is not a cron expression: %v", r.ReconcileInterval, err)
		}
	}
	switch {
	case r.ReconcileGrace == 0:
		r.ReconcileGrace = DefaultReconcileGrace
	case r.ReconcileGrace < 0:
		return configError("reconcileGrace", "must not be negative")
	}
	switch {
	case r.CleanupBatchSize == 0:
		r.CleanupBatchSize = MaxCleanupBatchSize
	case r.CleanupBatchSize < 0:
		return configError("cleanupBatchSize", "must be positive")
	case r.CleanupBatchSize > MaxCleanupBatchSize:
		r.CleanupBatchSize = MaxCleanupBatchSize
	}
	if r.CleanupAfterDays < 0 {
		return configError("cleanupAfterDays", "must not be negative")
	}
	return nil
}

func (r *resolved) resolveURLs() error {
	r.DownloadPath = strings.Trim(r.DownloadPath, "/")
	if r.DownloadPath == "" {
		r.DownloadPath = DefaultDownloadPath
	}
	if strings.ContainsAny(r.DownloadPath, "?#\\ ") || strings.Contains(r.DownloadPath, "..") {
		return configError("downloadPath", "%q is not a plain URL path", r.DownloadPath)
	}
	for option, v := range map[string]*string{"host": &r.Host, "cdnBaseUrl": &r.CDNBaseURL} {
		if *v == "" {
			continue
		}
		u, err := url.Parse(*v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return configError(option, "%q is not an absolute http(s) base URL", *v)
		}
		*v = strings.TrimRight(*v, "/")
	}
	return nil
}

func (r *resolved) resolveRemoteClone() error {
	rc := &r.RemoteClone
	if rc.Timeout < 0 {
		return configError("remoteClone.timeout", "must be positive")
	}
	if rc.Timeout == 0 {
		rc.Timeout = defaultRemoteCloneTimeout
	}
	r.remoteCloneMaxBytes = r.MaxFileSizeBytes
	if rc.MaxBytes < 0 {
		return configError("remoteClone.maxBytes", "must be positive")
	}
	if rc.MaxBytes > 0 && rc.MaxBytes < r.remoteCloneMaxBytes {
		r.remoteCloneMaxBytes = rc.MaxBytes
	}
	r.remoteRedirects = defaultRemoteCloneRedirects
	if rc.MaxRedirects != nil {
		if *rc.MaxRedirects < 0 || *rc.MaxRedirects > maxRemoteCloneRedirects {
			return configError("remoteClone.maxRedirects", "must be between 0 and %d", maxRemoteCloneRedirects)
		}
		r.remoteRedirects = *rc.MaxRedirects
	}
	for _, h := range rc.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "*/:@ ") {
			return configError("remoteClone.allowedHosts", "%q is not an exact host name", h)
		}
	}
	return nil
}

// EffectiveMaxFileSize is the largest file c lets through (maxFileSizeBytes
// after its default and clamp), or 0 when c is invalid: what a scanner in
// front of the service must be able to scan whole.
func EffectiveMaxFileSize(c Config) int64 {
	r, err := resolve(c)
	if err != nil {
		return 0
	}
	return r.policy.MaxFileSizeBytes
}

// Clamp is an option configured past its bound, and the bound used instead
// (docs/configuration.md: these are clamped rather than refused).
type Clamp struct {
	Option      string
	Given, Used int64
}

// Clamped lists the options whose configured value was replaced by its
// bound: the file-size ceiling (25 MiB), the URL lifetimes (an hour), the
// sweep batch (100). serve logs them at start.
func (s *Service) Clamped() []Clamp {
	var out []Clamp
	for _, c := range []Clamp{
		{"maxFileSizeBytes", s.cfg.given.MaxFileSizeBytes, s.cfg.policy.MaxFileSizeBytes},
		{"uploadUrlTtlSeconds", int64(s.cfg.given.UploadURLTTLSeconds), int64(s.cfg.UploadURLTTLSeconds)},
		{"resumableUploadTtlSeconds", int64(s.cfg.given.ResumableUploadTTLSeconds), int64(s.cfg.ResumableUploadTTLSeconds)},
		{"maxPrivateDownloadUrlTtlSeconds", int64(s.cfg.given.MaxPrivateDownloadURLTTLSeconds), int64(s.cfg.MaxPrivateDownloadURLTTLSeconds)},
		{"privateDownloadUrlTtlSeconds", int64(s.cfg.given.PrivateDownloadURLTTLSeconds), int64(s.cfg.PrivateDownloadURLTTLSeconds)},
		{"cleanupBatchSize", int64(s.cfg.given.CleanupBatchSize), int64(s.cfg.CleanupBatchSize)},
	} {
		if c.Given > 0 && c.Given != c.Used {
			out = append(out, c)
		}
	}
	return out
}
