package filecheck_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
)

func FuzzSanitizeName(f *testing.F) {
	for _, s := range []string{"report.pdf", "../../etc/passwd", "a\u202Eb.txt", "Cafe\u0301", strings.Repeat("é", 200) + ".docx", "\xff\xfe", " . "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := filecheck.SanitizeName(in)
		if err != nil {
			require.Equal(t, filecheck.RuleNameEmpty, filecheck.RuleOf(err))
			return
		}
		require.NotEmpty(t, out)
		require.LessOrEqual(t, len(out), filecheck.MaxNameBytes)
		require.True(t, utf8.ValidString(out))
		require.False(t, strings.ContainsAny(out, `/\`), "no directory part survives: %q", out)
		for _, r := range out {
			require.False(t, unicode.IsControl(r) || unicode.Is(unicode.Cf, r), "invisible or control rune %U in %q", r, out)
		}
		again, err := filecheck.SanitizeName(out)
		require.NoError(t, err)
		if norm.NFC.IsNormalString(out) {
			require.Equal(t, out, again, "sanitizing is idempotent")
		}
	})
}

var mainParts = []string{"word/document.xml", "xl/workbook.xml", "ppt/presentation.xml"}

func FuzzCheckOOXML(f *testing.F) {
	f.Add(docx(f), uint8(0))
	f.Add(xlsx(f), uint8(1))
	f.Add(pptx(f), uint8(2))
	f.Add(rawZip{entries: ooxmlEntries(docxMain)}.bytes(), uint8(0))
	f.Add(rawZip{entries: ooxmlEntries(docxMain), zip64Locator: true}.bytes(), uint8(0))
	f.Add([]byte("PK\x05\x06"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		main := mainParts[int(which)%len(mainParts)]
		cr := &filecheck.CountingReaderAt{R: bytes.NewReader(data)}
		err := filecheck.CheckOOXML(cr, int64(len(data)), main)
		require.LessOrEqual(t, cr.N, int64(len(data))+int64(filecheck.MaxZipEntries)*(30+0xffff), "reads stay bounded")
		if err != nil {
			require.ErrorIs(t, err, filecheck.ErrInvalidUpload, "every refusal is an invalid upload: %v", err)
			return
		}
		// Accepted: the standard library agrees it is a ZIP within the limits.
		zr, zerr := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		require.NoError(t, zerr, "accepted but unreadable as a ZIP")
		require.LessOrEqual(t, len(zr.File), filecheck.MaxZipEntries)
		var total uint64
		names := map[string]bool{}
		for _, f := range zr.File {
			require.LessOrEqual(t, f.UncompressedSize64, uint64(filecheck.MaxZipEntryUncompressed))
			total += f.UncompressedSize64
			require.NotContains(t, f.Name, "..")
			require.False(t, strings.HasPrefix(f.Name, "/"))
			require.False(t, names[strings.ToLower(f.Name)], "duplicate %q", f.Name)
			names[strings.ToLower(f.Name)] = true
			require.Zero(t, f.Flags&0x1, "encrypted entry accepted")
		}
		require.LessOrEqual(t, total, uint64(filecheck.MaxZipTotalUncompressed))
		require.True(t, names["[content_types].xml"] && names[main])
	})
}

func FuzzCheck(f *testing.F) {
	f.Add("report.pdf", "application/pdf", []byte(pdfBytes))
	f.Add("data.json", "", []byte(`{"a":1}`))
	f.Add("rows.csv", "text/csv", []byte("a,b\n1,2\n"))
	f.Add("plan.docx", "", docx(f))
	f.Add("icon.png", "image/png", pngBytes(f))
	f.Add("x.txt", "", []byte("\xff"))
	p, err := filecheck.NewPolicy(nil, 1<<20, true)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, name, declared string, body []byte) {
		r, _, err := p.Check(filecheck.Meta{Name: name, DeclaredType: declared, Size: int64(len(body))}, bytes.NewReader(body))
		if err != nil {
			require.ErrorIs(t, err, filecheck.ErrInvalidUpload, "%v", err)
			return
		}
		require.Contains(t, p.AllowedMIMETypes, r.ContentType)
		require.Positive(t, len(body))
		require.LessOrEqual(t, int64(len(body)), p.MaxFileSizeBytes)
		again, err := filecheck.SanitizeName(r.Name)
		require.NoError(t, err)
		require.NotEmpty(t, again)
		if r.ContentType == filecheck.TypeText || r.ContentType == filecheck.TypeCSV || r.ContentType == filecheck.TypeJSON {
			require.True(t, utf8.Valid(body))
			require.NotContains(t, string(body), "\x00")
		}
	})
}

// FuzzJSONAgreesWithEncodingJSON: the streaming validator accepts exactly
// what encoding/json accepts (within the nesting bound).
func FuzzJSONAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2.5e-3,"x\u00e9",true,null]`, `{"a":{"b":[]}}`, `01`, `1.`, `"\x"`, `[1,]`, ` {"a" : 1 } `, `-0.0E+1`, `"tab	"`, `[`} {
		f.Add([]byte(s))
	}
	p := filecheck.DefaultPolicy()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 || bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) > 500 {
			return
		}
		_, _, err := p.Check(filecheck.Meta{Name: "x.json", Size: int64(len(data))}, bytes.NewReader(data))
		if json.Valid(data) {
			require.NoError(t, err, "%q", data)
		} else {
			require.Equal(t, filecheck.RuleContentJSON, filecheck.RuleOf(err), "%q", data)
		}
	})
}
