package objectkey_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/objectkey"
)

func ptr(s string) *string { return &s }

func TestPairRoundTrip(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e")
	for _, c := range []struct {
		name   string
		tenant string
		dept   *string
	}{
		{"plain", "acme", nil},
		{"slashes", "a/b/../c", nil},
		{"dot-dot", "..", ptr("..")},
		{"unicode", "Société générale ☃", ptr("ventes/est")},
		{"empty department", "acme", ptr("")},
		{"control characters", "a\x00b\nc", ptr("\t")},
		{"looks like staging", "_staging", ptr("t-x")},
	} {
		final, staging, err := objectkey.Pair("core", c.tenant, c.dept, id, "pdf", false)
		require.NoError(t, err, c.name)
		require.NotEqual(t, final, staging)
		public, publicStaging, err := objectkey.Pair("core", c.tenant, c.dept, id, "pdf", true)
		require.NoError(t, err, c.name)
		require.Equal(t, staging, publicStaging, "a staging key is private whatever the file's visibility")
		require.NotEqual(t, final, public)
		require.True(t, strings.HasPrefix(public, "core/_public/"), public)
		require.False(t, strings.HasPrefix(final, "core/_public/"), "a private key never shares the public prefix: %s", final)
		for _, key := range []string{final, staging, public} {
			segs := strings.Split(key, "/")
			for _, s := range segs {
				require.NotContains(t, []string{"", ".", ".."}, s, "%s: unsafe segment in %q", c.name, key)
				require.NotContains(t, s, "\\", c.name)
			}
			require.True(t, strings.HasSuffix(key, "/"+id.String()+".pdf"), key)

			k, err := objectkey.Parse(key)
			require.NoError(t, err, "%s: %q", c.name, key)
			require.Equal(t, c.tenant, k.Tenant)
			require.Equal(t, c.dept, k.Department)
			require.Equal(t, id, k.ID)
			require.Equal(t, "pdf", k.Ext)
			require.Equal(t, "core", k.Folder)
			require.Equal(t, key == staging, k.Staging)
			require.Equal(t, key == public, k.Public)
			again, err := k.String()
			require.NoError(t, err)
			require.Equal(t, key, again)
		}
	}
}

func TestNamespacesNeverCollide(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, c := range []struct {
		tenant string
		dept   *string
	}{
		{"a", nil}, {"a", ptr("")}, {"a", ptr("b")}, {"ab", nil}, {"a-d-", nil}, {"a", ptr("-d-")}, {"A", nil},
	} {
		ns, err := objectkey.Namespace(c.tenant, c.dept)
		require.NoError(t, err)
		label := c.tenant + "|<nil>"
		if c.dept != nil {
			label = c.tenant + "|" + *c.dept
		}
		prev, dup := seen[ns]
		require.False(t, dup, "%q and %q share namespace %q", prev, label, ns)
		seen[ns] = label
	}
	_, err := objectkey.Namespace("", nil)
	require.ErrorIs(t, err, objectkey.ErrInvalid, "a tenant is required")
}

func TestNormalizeFolder(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":              "core",
		"/":             "core",
		"uploads":       "uploads",
		"/a//b/":        "a/b",
		"app.v2/files_": "app.v2/files_",
	} {
		got, err := objectkey.NormalizeFolder(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"..", "a/../b", "./a", "a/.", "_staging", "a/_x", "-a", "a b", "a\\b", "é", "a\x00", strings.Repeat("a", 63) + "/" + strings.Repeat("b", 63) + "/c"} {
		_, err := objectkey.NormalizeFolder(bad)
		require.ErrorIs(t, err, objectkey.ErrInvalid, "%q must be refused", bad)
	}
}

func TestExtension(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"report.PDF": "pdf", "archive.tar.gz": "gz", "noext": "", "trailing.": "", ".hidden": "hidden",
		"weird.p df": "", "long." + strings.Repeat("x", 17): "", "x.ünï": "",
	} {
		require.Equal(t, want, objectkey.Extension(name), name)
	}
}

func TestKeyLengthBound(t *testing.T) {
	t.Parallel()
	_, _, err := objectkey.Pair("core", strings.Repeat("t", 700), nil, uuid.New(), "", false)
	require.ErrorIs(t, err, objectkey.ErrInvalid, "a key over 1024 bytes is refused")
	final, staging, err := objectkey.Pair("core", strings.Repeat("t", 255), ptr(strings.Repeat("d", 255)), uuid.New(), "docx", true)
	require.NoError(t, err, "the longest scope the schema allows still fits")
	require.LessOrEqual(t, len(final), objectkey.MaxKeyLength)
	require.LessOrEqual(t, len(staging), objectkey.MaxKeyLength)
}

func TestParseRefusesForeignKeys(t *testing.T) {
	t.Parallel()
	id := uuid.New().String()
	for _, bad := range []string{
		"", "core", "core/" + id, "core/t-mfrggzdf/not-a-uuid.pdf", "core/x-mfrggzdf/" + id,
		"../t-mfrggzdf/" + id, "core/t-/" + id, "core/t-MFRGGZDF/" + id, "core/t-mfrggzdf/" + strings.ToUpper(id),
		"core/t-mfrggzdf/" + id + ".PDF", "_staging/t-mfrggzdf/" + id, "core//t-mfrggzdf/" + id,
		"core/t-mfrggzdf/" + id + "/", strings.Repeat("a/", 600) + "t-mfrggzdf/" + id,
	} {
		_, err := objectkey.Parse(bad)
		require.ErrorIs(t, err, objectkey.ErrInvalid, "%q", bad)
	}
}

func FuzzParse(f *testing.F) {
	id := uuid.MustParse("6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e")
	final, staging, _ := objectkey.Pair("a/b", "t/../x", ptr(""), id, "csv", false)
	public, _, _ := objectkey.Pair("a/b", "t/../x", ptr(""), id, "csv", true)
	f.Add(final)
	f.Add(staging)
	f.Add(public)
	f.Add("core/t-/x")
	f.Fuzz(func(t *testing.T, key string) {
		k, err := objectkey.Parse(key)
		if err != nil {
			return
		}
		again, err := k.String()
		require.NoError(t, err)
		require.Equal(t, key, again, "a parsed key is canonical")
		for _, s := range strings.Split(key, "/") {
			require.NotContains(t, []string{"", ".", ".."}, s)
		}
	})
}

func FuzzNamespace(f *testing.F) {
	f.Add("acme", "sales", true)
	f.Add("../..", "", false)
	f.Fuzz(func(t *testing.T, tenant, dept string, hasDept bool) {
		var d *string
		if hasDept {
			d = &dept
		}
		key, err := objectkey.Key{Folder: "core", Tenant: tenant, Department: d, ID: uuid.New()}.String()
		if err != nil {
			return
		}
		k, err := objectkey.Parse(key)
		require.NoError(t, err)
		require.Equal(t, tenant, k.Tenant)
		require.Equal(t, d, k.Department)
	})
}
