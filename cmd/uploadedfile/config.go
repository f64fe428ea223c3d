package main

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/uploadedfile/uploadedfile/internal/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/policy"
	"github.com/uploadedfile/uploadedfile/service"
)

// fileConfig is the server configuration: a YAML file whose keys are the
// spec's option names, overridden by UPLOADEDFILE_<OPTION> environment
// variables (camelCase option names in upper snake case, "__" for nesting:
// UPLOADEDFILE_LOCAL_ROOT, UPLOADEDFILE_REMOTE_CLONE__ALLOWED_HOSTS=a,b).
type fileConfig struct {
	Listen      string `koanf:"listen"`
	DatabaseURL string `koanf:"databaseUrl"`
	Migrate     *bool  `koanf:"migrate"`

	Driver                          string   `koanf:"driver"`
	AccessID                        string   `koanf:"accessId"`
	AccessKey                       string   `koanf:"accessKey"`
	Region                          string   `koanf:"region"`
	Endpoint                        string   `koanf:"endpoint"`
	ForcePathStyle                  bool     `koanf:"forcePathStyle"`
	Bucket                          string   `koanf:"bucket"`
	Folder                          string   `koanf:"folder"`
	LocalRoot                       string   `koanf:"localRoot"`
	Host                            string   `koanf:"host"`
	CDNBaseURL                      string   `koanf:"cdnBaseUrl"`
	DefaultVisibility               string   `koanf:"defaultVisibility"`
	AllowPublicUploads              bool     `koanf:"allowPublicUploads"`
	PublicAccessMode                string   `koanf:"publicAccessMode"`
	PublicFiles                     *bool    `koanf:"publicFiles"`
	UploadURLTTLSeconds             int      `koanf:"uploadUrlTtlSeconds"`
	PrivateDownloadURLTTLSeconds    int      `koanf:"privateDownloadUrlTtlSeconds"`
	MaxPrivateDownloadURLTTLSeconds int      `koanf:"maxPrivateDownloadUrlTtlSeconds"`
	PendingCleanupInterval          string   `koanf:"pendingCleanupInterval"`
	TemporaryCleanupInterval        string   `koanf:"temporaryCleanupInterval"`
	CleanupBatchSize                int      `koanf:"cleanupBatchSize"`
	DownloadPath                    string   `koanf:"downloadPath"`
	MaxFileSizeBytes                int64    `koanf:"maxFileSizeBytes"`
	AllowedMIMETypes                []string `koanf:"allowedMimeTypes"`
	ValidateMagicBytes              *bool    `koanf:"validateMagicBytes"`
	CleanupAfterDays                int      `koanf:"cleanupAfterDays"`
	SpoolDir                        string   `koanf:"spoolDir"`
	// AuthorizationPolicy and AttachedReadPolicy are CEL expressions
	// (internal/policy): the first evaluates to "owner", "tenant" or "deny",
	// the second to a bool.
	AuthorizationPolicy string `koanf:"authorizationPolicy"`
	AttachedReadPolicy  string `koanf:"attachedReadPolicy"`
	RemoteClone         struct {
		Enabled      bool          `koanf:"enabled"`
		Timeout      time.Duration `koanf:"timeout"`
		MaxBytes     int64         `koanf:"maxBytes"`
		MaxRedirects *int          `koanf:"maxRedirects"`
		AllowedHosts []string      `koanf:"allowedHosts"`
		AllowedPorts []int         `koanf:"allowedPorts"`
	} `koanf:"remoteClone"`

	Auth struct {
		HMACSecret string `koanf:"hmacSecret"`
		JWKSFile   string `koanf:"jwksFile"`
		JWKSURL    string `koanf:"jwksUrl"`
		Issuer     string `koanf:"issuer"`
		Audience   string `koanf:"audience"`
		Claims     struct {
			Tenant      string `koanf:"tenant"`
			Department  string `koanf:"department"`
			User        string `koanf:"user"`
			Roles       string `koanf:"roles"`
			Permissions string `koanf:"permissions"`
		} `koanf:"claims"`
	} `koanf:"auth"`
}

// loadConfig reads path (optional) and the environment. An unknown key is
// an error that names it.
func loadConfig(path string, environ func() []string) (fileConfig, error) {
	k := koanf.New(".")
	if path != "" {
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return fileConfig{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if err := k.Load(env.Provider(".", env.Opt{Prefix: "UPLOADEDFILE_", TransformFunc: envKey, EnvironFunc: environ}), nil); err != nil {
		return fileConfig{}, fmt.Errorf("environment: %w", err)
	}
	var c fileConfig
	err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToWeakSliceHookFunc(",")),
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		Result:           &c,
		TagName:          "koanf",
	}})
	if err != nil {
		return fileConfig{}, fmt.Errorf("configuration: %w", err)
	}
	if v := lookup(environ, "DATABASE_URL"); v != "" && c.DatabaseURL == "" {
		c.DatabaseURL = v
	}
	return c, nil
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
	sc := service.Config{
		Driver: c.Driver, AccessID: c.AccessID, AccessKey: c.AccessKey, Region: c.Region, Endpoint: c.Endpoint,
		ForcePathStyle: c.ForcePathStyle, Bucket: c.Bucket, Folder: c.Folder, LocalRoot: c.LocalRoot, Host: c.Host,
		CDNBaseURL: c.CDNBaseURL, DefaultVisibility: service.Visibility(c.DefaultVisibility), AllowPublicUploads: c.AllowPublicUploads,
		PublicAccessMode: c.PublicAccessMode, PublicFiles: c.PublicFiles, UploadURLTTLSeconds: c.UploadURLTTLSeconds,
		PrivateDownloadURLTTLSeconds: c.PrivateDownloadURLTTLSeconds, MaxPrivateDownloadURLTTLSeconds: c.MaxPrivateDownloadURLTTLSeconds,
		PendingCleanupInterval: c.PendingCleanupInterval, TemporaryCleanupInterval: c.TemporaryCleanupInterval,
		CleanupBatchSize: c.CleanupBatchSize, DownloadPath: c.DownloadPath, MaxFileSizeBytes: c.MaxFileSizeBytes,
		AllowedMIMETypes: c.AllowedMIMETypes, ValidateMagicBytes: c.ValidateMagicBytes, CleanupAfterDays: c.CleanupAfterDays,
		SpoolDir: c.SpoolDir,
		RemoteClone: service.RemoteCloneConfig{
			Enabled: c.RemoteClone.Enabled, Timeout: c.RemoteClone.Timeout, MaxBytes: c.RemoteClone.MaxBytes,
			MaxRedirects: c.RemoteClone.MaxRedirects, AllowedHosts: c.RemoteClone.AllowedHosts, AllowedPorts: c.RemoteClone.AllowedPorts,
		},
	}
	var err error
	if c.AuthorizationPolicy != "" {
		if sc.AuthorizationPolicy, err = policy.Authorization(c.AuthorizationPolicy); err != nil {
			return service.Config{}, err
		}
	}
	if c.AttachedReadPolicy != "" {
		if sc.AttachedReadPolicy, err = policy.AttachedRead(c.AttachedReadPolicy); err != nil {
			return service.Config{}, err
		}
	}
	return sc, nil
}

// authConfig maps the auth section.
func (c fileConfig) authConfig() (httpapi.AuthConfig, error) {
	a := c.Auth
	if a.HMACSecret == "" && a.JWKSFile == "" && a.JWKSURL == "" {
		return httpapi.AuthConfig{}, errors.New("auth: configure auth.hmacSecret, auth.jwksFile or auth.jwksUrl (or run with --dev)")
	}
	return httpapi.AuthConfig{
		HMACSecret: []byte(a.HMACSecret), JWKSFile: a.JWKSFile, JWKSURL: a.JWKSURL, Issuer: a.Issuer, Audience: a.Audience,
		Claims: httpapi.ClaimNames{Tenant: a.Claims.Tenant, Department: a.Claims.Department, User: a.Claims.User, Roles: a.Claims.Roles, Permissions: a.Claims.Permissions},
	}, nil
}
