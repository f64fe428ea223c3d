package service_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	for _, c := range []struct {
		cfg    service.Config
		option string
	}{
		{service.Config{AccessID: "id"}, "accessId/accessKey"},
		{service.Config{AccessKey: "key"}, "accessId/accessKey"},
		{service.Config{AccessID: " ", AccessKey: "\t"}, "accessId/accessKey"},
		{service.Config{AccessID: "id", AccessKey: "key"}, "bucket"}, // a complete pair selects s3
		{service.Config{Driver: "s3"}, "bucket"},
		{service.Config{Driver: "gcs"}, "driver"},
		{service.Config{PublicAccessMode: "public"}, "publicAccessMode"},
		{service.Config{Folder: "a/../b"}, "folder"},
		{service.Config{UploadURLTTLSeconds: -1}, "uploadUrlTtlSeconds"},
		{service.Config{PrivateDownloadURLTTLSeconds: -5}, "privateDownloadUrlTtlSeconds"},
		{service.Config{CleanupBatchSize: -1}, "cleanupBatchSize"},
		{service.Config{CleanupAfterDays: -1}, "cleanupAfterDays"},
		{service.Config{PendingCleanupInterval: "every day"}, "pendingCleanupInterval"},
		{service.Config{TemporaryCleanupInterval: "* * *"}, "temporaryCleanupInterval"},
		{service.Config{DefaultVisibility: service.Public}, "defaultVisibility"},
		{service.Config{DefaultVisibility: "hidden"}, "defaultVisibility"},
		{service.Config{Host: "files.example.com"}, "host"},
		{service.Config{CDNBaseURL: "ftp://cdn"}, "cdnBaseUrl"},
		{service.Config{DownloadPath: "a/../b"}, "downloadPath"},
		{service.Config{AllowedMIMETypes: []string{"application/x-msdownload"}}, "allowedMimeTypes"},
		{service.Config{MaxFileSizeBytes: -1}, "maxFileSizeBytes"},
		{service.Config{RemoteClone: service.RemoteCloneConfig{MaxRedirects: ptr(6)}}, "remoteClone.maxRedirects"},
		{service.Config{RemoteClone: service.RemoteCloneConfig{AllowedHosts: []string{"*.example.com"}}}, "remoteClone.allowedHosts"},
		{service.Config{Variants: service.VariantsConfig{Engine: "imagemagick"}}, "variants.engine"},
		{service.Config{Variants: service.VariantsConfig{Engine: "go", Presets: map[string]service.VariantPreset{
			"hero": {Width: 800, Height: 600, Fit: "cover", Format: "avif"},
		}}}, "variants.presets.hero: format avif: the go engine does not write it"},
	} {
		c.cfg.LocalRoot = t.TempDir()
		_, err := service.New(ctx, c.cfg, pool)
		require.ErrorContains(t, err, "uploadedfile config: "+c.option, "%+v", c.cfg)
	}
}

func TestConfigDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	eff := func(c service.Config) service.Config {
		t.Helper()
		if c.LocalRoot == "" && c.Driver != service.DriverS3 && c.AccessID == "" {
			c.LocalRoot = t.TempDir()
		}
		s, err := service.New(ctx, c, pool)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s.EffectiveConfig()
	}

	d := eff(service.Config{})
	require.Equal(t, service.DriverLocal, d.Driver)
	require.Equal(t, "core", d.Folder)
	require.Equal(t, service.Private, d.DefaultVisibility)
	require.False(t, d.AllowPublicUploads)
	require.Equal(t, "external", d.PublicAccessMode)
	require.Equal(t, 600, d.UploadURLTTLSeconds)
	require.Equal(t, 900, d.PrivateDownloadURLTTLSeconds)
	require.Equal(t, 3600, d.MaxPrivateDownloadURLTTLSeconds)
	require.Equal(t, "0 3 * * *", d.PendingCleanupInterval)
	require.Equal(t, "*/15 * * * *", d.TemporaryCleanupInterval)
	require.Equal(t, 100, d.CleanupBatchSize)
	require.Equal(t, "uploaded-file", d.DownloadPath)
	require.EqualValues(t, 10<<20, d.MaxFileSizeBytes)
	require.False(t, d.RemoteClone.Enabled, "remote cloning is disabled by default")

	b := eff(service.Config{
		UploadURLTTLSeconds: 7200, PrivateDownloadURLTTLSeconds: 5000, MaxPrivateDownloadURLTTLSeconds: 1800,
		CleanupBatchSize: 500, MaxFileSizeBytes: 100 << 20, Folder: "/tenant-files//v2/", DownloadPath: "/files/",
	})
	require.Equal(t, 3600, b.UploadURLTTLSeconds, "at most one hour")
	require.Equal(t, 1800, b.MaxPrivateDownloadURLTTLSeconds)
	require.Equal(t, 1800, b.PrivateDownloadURLTTLSeconds, "never above the configured maximum")
	require.Equal(t, 100, b.CleanupBatchSize, "capped at 100")
	require.EqualValues(t, 25<<20, b.MaxFileSizeBytes, "clamped to the absolute 25 MiB ceiling")
	require.Equal(t, "tenant-files/v2", b.Folder)
	require.Equal(t, "files", b.DownloadPath)

	legacy := eff(service.Config{PublicFiles: ptr(true)})
	require.True(t, legacy.AllowPublicUploads)
	require.Equal(t, service.Public, legacy.DefaultVisibility)

	s3 := eff(service.Config{AccessID: "id", AccessKey: "secret", Bucket: "b", Endpoint: "http://127.0.0.1:1"})
	require.Equal(t, service.DriverS3, s3.Driver, "a complete pair selects s3")
	require.Equal(t, "REDACTED", s3.AccessKey, "the secret is not shown")
	explicit := eff(service.Config{Driver: service.DriverS3, Bucket: "b", Endpoint: "http://127.0.0.1:1"})
	require.Equal(t, service.DriverS3, explicit.Driver, "explicit s3 without a pair: the default credential chain")
}

// TestConfigLocalRootDefault: <cwd>/upload, absolute. Not parallel: it
// changes the working directory.
func TestConfigLocalRootDefault(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := service.New(context.Background(), service.Config{}, pgtest.New(t))
	require.NoError(t, err)
	defer s.Close()
	want, _ := filepath.EvalSymlinks(dir)
	require.Equal(t, filepath.Join(want, "upload"), s.EffectiveConfig().LocalRoot)
	_, err = os.Stat(filepath.Join(dir, "upload"))
	require.NoError(t, err, "created")
}

// TestClampedOptionsAreReported: an option past its bound is replaced by
// the bound, and Clamped says which, with both values (serve logs them).
func TestClampedOptionsAreReported(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, func(c *service.Config) {
		c.MaxFileSizeBytes = 100 << 20
		c.UploadURLTTLSeconds = 7200
		c.CleanupBatchSize = 50
	})
	require.ElementsMatch(t, []service.Clamp{
		{Option: "maxFileSizeBytes", Given: 100 << 20, Used: 25 << 20},
		{Option: "uploadUrlTtlSeconds", Given: 7200, Used: 3600},
	}, b.svc.Clamped(), "cleanupBatchSize 50 is within its bound")
}

// Config is the one configuration model: the CLI parses its file and
// environment keys straight into it by these tags (and docs/configuration.md
// is checked against them), so every field names its key -- or "-" for a
// field only Go code sets -- and a new field cannot be left out of the
// file by accident.
func TestConfigFieldsNameTheirKeys(t *testing.T) {
	t.Parallel()
	var untagged []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			tag, ok := f.Tag.Lookup("koanf")
			if !ok || tag == "" {
				untagged = append(untagged, path+f.Name)
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Map {
				ft = ft.Elem()
			}
			if tag != "-" && ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
				walk(ft, path+f.Name+".")
			}
		}
	}
	walk(reflect.TypeFor[service.Config](), "")
	require.Empty(t, untagged, "fields of service.Config without a koanf key")
}
