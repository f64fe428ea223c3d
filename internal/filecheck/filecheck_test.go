package filecheck_test

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
)

func pngBytes(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

func jpegBytes(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, 8, 8)), nil))
	return buf.Bytes()
}

func gifBytes(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, gif.Encode(&buf, image.NewPaletted(image.Rect(0, 0, 2, 2), []color.Color{color.Black, color.White}), nil))
	return buf.Bytes()
}

// webpBytes is a minimal lossless WebP (RIFF container, VP8L chunk).
func webpBytes() []byte {
	payload := []byte{0x2f, 0x00, 0x00, 0x00, 0x00, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0x00}
	chunk := append([]byte("VP8L"), byte(len(payload)), 0, 0, 0)
	chunk = append(chunk, payload...)
	body := append([]byte("WEBP"), chunk...)
	return append(append([]byte("RIFF"), byte(len(body)), 0, 0, 0), body...)
}

const pdfBytes = "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

func zipBytes(t testing.TB) []byte {
	return officeFile(t, map[string]string{"docProps/app.xml": "<Properties/>"})
}

func check(p filecheck.Policy, name, declared string, body []byte) (filecheck.Result, error) {
	r, _, err := p.Check(filecheck.Meta{Name: name, DeclaredType: declared, Size: int64(len(body))}, bytes.NewReader(body))
	return r, err
}

func TestValidFilesOfEveryType(t *testing.T) {
	t.Parallel()
	p := filecheck.DefaultPolicy()
	for _, c := range []struct {
		name, declared, want string
		body                 []byte
	}{
		{"data.json", "application/json", filecheck.TypeJSON, []byte(`{"a":[1,2,{"b":"ü"}]}`)},
		{"report.pdf", "application/pdf", filecheck.TypePDF, []byte(pdfBytes)},
		{"bundle.zip", "application/zip", filecheck.TypeZIP, zipBytes(t)},
		{"a docx is also a zip.zip", "", filecheck.TypeZIP, docx(t)},
		{"plan.docx", filecheck.TypeDOCX, filecheck.TypeDOCX, docx(t)},
		{"sheet.xlsx", filecheck.TypeXLSX, filecheck.TypeXLSX, xlsx(t)},
		{"deck.pptx", filecheck.TypePPTX, filecheck.TypePPTX, pptx(t)},
		{"anim.gif", "image/gif", filecheck.TypeGIF, gifBytes(t)},
		{"photo.JPG", "image/jpeg", filecheck.TypeJPEG, jpegBytes(t)},
		{"photo.jpeg", "image/jpg", filecheck.TypeJPEG, jpegBytes(t)},
		{"icon.png", "image/png", filecheck.TypePNG, pngBytes(t)},
		{"pic.webp", "image/webp", filecheck.TypeWebP, webpBytes()},
		{"rows.csv", "text/csv; charset=utf-8", filecheck.TypeCSV, []byte("name,city\nZoë,Köln\n")},
		{"notes.txt", "", filecheck.TypeText, []byte("plain text, with ✓ unicode\n")},
	} {
		r, err := check(p, c.name, c.declared, c.body)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, r.ContentType, c.name)
	}
}

// TestContentRules: one sample per content rule, each failing for it alone.
func TestContentRules(t *testing.T) {
	t.Parallel()
	p := filecheck.DefaultPolicy()
	elf := append([]byte("\x7fELF\x02\x01\x01\x00"), bytes.Repeat([]byte{0}, 120)...)
	exe := append([]byte("MZ\x90\x00\x03\x00\x00\x00"), bytes.Repeat([]byte{0}, 120)...)
	for _, c := range []struct {
		sample, name string
		body         []byte
		rule         string
	}{
		{"renamed Linux executable", "report.pdf", elf, filecheck.RuleContentSignature},
		{"renamed Windows executable", "photo.png", exe, filecheck.RuleContentSignature},
		{"PNG named .pdf", "report.pdf", pngBytes(t), filecheck.RuleContentOtherType},
		{"JPEG named .png", "icon.png", jpegBytes(t), filecheck.RuleContentOtherType},
		{"PDF named .txt", "notes.txt", []byte(pdfBytes), filecheck.RuleContentOtherType},
		{"PNG named .csv", "rows.csv", pngBytes(t), filecheck.RuleContentOtherType},
		{"invalid UTF-8 in .csv", "rows.csv", []byte("name,city\nZo\xeb,K\xf6ln\n"), filecheck.RuleContentUTF8},
		{"truncated UTF-8 at the end", "notes.txt", []byte("ends in \xe2\x9c"), filecheck.RuleContentUTF8},
		{"NUL in .txt", "notes.txt", []byte("text\x00more"), filecheck.RuleContentNUL},
		{"JSON that does not parse", "data.json", []byte(`{"a": [1, 2}`), filecheck.RuleContentJSON},
		{"two JSON values", "data.json", []byte(`{} {}`), filecheck.RuleContentJSON},
		{"JSON cut short", "data.json", []byte(`[1, 2`), filecheck.RuleContentJSON},
		{"a DOCX named .xlsx", "sheet.xlsx", docx(t), filecheck.RuleZipMainPart},
		{"a PNG named .docx", "plan.docx", pngBytes(t), filecheck.RuleContentSignature},
		{"a zip named .gif", "anim.gif", zipBytes(t), filecheck.RuleContentOtherType},
	} {
		_, err := check(p, c.name, "", c.body)
		require.ErrorIs(t, err, filecheck.ErrInvalidUpload, c.sample)
		require.Equal(t, c.rule, filecheck.RuleOf(err), "%s: %v", c.sample, err)
	}
}

// TestUTF8AcrossChunks: a multi-byte character split across the streaming
// chunk boundary is valid; an invalid byte past the first chunk is caught.
func TestUTF8AcrossChunks(t *testing.T) {
	t.Parallel()
	p := filecheck.DefaultPolicy()
	for offset := 64<<10 - 3; offset <= 64<<10+1; offset++ {
		body := append(bytes.Repeat([]byte("a"), offset), []byte("✓ end")...)
		_, err := check(p, "n.txt", "", body)
		require.NoError(t, err, "offset %d", offset)
	}
	body := append(bytes.Repeat([]byte("a"), 200_000), 0xff)
	_, err := check(p, "n.txt", "", body)
	require.Equal(t, filecheck.RuleContentUTF8, filecheck.RuleOf(err))
}

func TestMagicBytesOff(t *testing.T) {
	t.Parallel()
	p, err := filecheck.NewPolicy(nil, 0, false)
	require.NoError(t, err)
	_, err = check(p, "report.pdf", "", pngBytes(t))
	require.NoError(t, err, "signatures are not checked when validateMagicBytes is off")
	_, err = check(p, "sheet.xlsx", "", docx(t))
	require.Equal(t, filecheck.RuleZipMainPart, filecheck.RuleOf(err), "the OOXML structure check always runs")
}

func TestMetaRules(t *testing.T) {
	t.Parallel()
	p := filecheck.DefaultPolicy()
	onlyImages := p.Narrow([]string{"image/png", "image/jpeg"}, 0)
	for _, c := range []struct {
		sample   string
		policy   filecheck.Policy
		meta     filecheck.Meta
		wantRule string
	}{
		{"unknown extension", p, filecheck.Meta{Name: "setup.exe", Size: 10}, filecheck.RuleTypeUnknown},
		{"no extension", p, filecheck.Meta{Name: "README", Size: 10}, filecheck.RuleTypeUnknown},
		{"type outside the narrowed allowlist", onlyImages, filecheck.Meta{Name: "report.pdf", Size: 10}, filecheck.RuleTypeNotAllowed},
		{"declared type disagrees with the extension", p, filecheck.Meta{Name: "report.pdf", DeclaredType: "image/png", Size: 10}, filecheck.RuleTypeDeclared},
		{"declared type unknown", p, filecheck.Meta{Name: "report.pdf", DeclaredType: "application/x-msdownload", Size: 10}, filecheck.RuleTypeDeclared},
		{"declared type unparsable", p, filecheck.Meta{Name: "report.pdf", DeclaredType: "pdf", Size: 10}, filecheck.RuleTypeDeclared},
		{"empty file", p, filecheck.Meta{Name: "report.pdf", Size: 0}, filecheck.RuleSizeEmpty},
		{"over the configured 10 MiB", p, filecheck.Meta{Name: "report.pdf", Size: 10<<20 + 1}, filecheck.RuleSizeTooLarge},
		{"empty name", p, filecheck.Meta{Name: " . ", Size: 10}, filecheck.RuleNameEmpty},
	} {
		_, err := c.policy.CheckMeta(c.meta)
		require.Equal(t, c.wantRule, filecheck.RuleOf(err), "%s: %v", c.sample, err)
		var fe *filecheck.Error
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "core.file.invalid-upload", fe.Code())
		require.Equal(t, c.wantRule == filecheck.RuleSizeTooLarge, fe.SizeOnly(), c.sample)
	}
	r, err := p.CheckMeta(filecheck.Meta{Name: "../../Quarterly Report.PDF", DeclaredType: "Application/PDF", Size: 10 << 20})
	require.NoError(t, err, "exactly the limit is allowed")
	require.Equal(t, filecheck.Result{Name: "Quarterly Report.PDF", ContentType: filecheck.TypePDF, Extension: "pdf"}, r)
}

func TestPolicyNarrowsNeverWidens(t *testing.T) {
	t.Parallel()
	base, err := filecheck.NewPolicy([]string{"application/pdf", "image/png"}, 5<<20, true)
	require.NoError(t, err)

	n := base.Narrow([]string{"image/png", "image/gif", "application/x-evil"}, 50<<20)
	require.Equal(t, []string{filecheck.TypePNG}, n.AllowedMIMETypes, "intersection with the configuration")
	require.EqualValues(t, 5<<20, n.MaxFileSizeBytes, "a call cannot raise the limit")

	n = base.Narrow(nil, 1<<20)
	require.Equal(t, base.AllowedMIMETypes, n.AllowedMIMETypes, "nil keeps the configured types")
	require.EqualValues(t, 1<<20, n.MaxFileSizeBytes, "a call can lower the limit")

	n = base.Narrow([]string{}, 0)
	require.Empty(t, n.AllowedMIMETypes, "an empty list allows nothing")
	require.Equal(t, base.AllowedMIMETypes, []string{filecheck.TypePDF, filecheck.TypePNG}, "the base policy is unchanged")

	clamped, err := filecheck.NewPolicy(nil, 100<<20, true)
	require.NoError(t, err)
	require.EqualValues(t, 25<<20, clamped.MaxFileSizeBytes, "the configuration is clamped to the absolute 25 MiB ceiling")
	def, err := filecheck.NewPolicy(nil, 0, true)
	require.NoError(t, err)
	require.EqualValues(t, 10<<20, def.MaxFileSizeBytes)
	require.Len(t, def.AllowedMIMETypes, 12, "the documented default allowlist")

	_, err = filecheck.NewPolicy([]string{"application/x-msdownload"}, 0, true)
	require.ErrorContains(t, err, "allowedMimeTypes")
	_, err = filecheck.NewPolicy(nil, -1, true)
	require.ErrorContains(t, err, "maxFileSizeBytes")
}

func TestSanitizeName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) + ".docx" // 405 bytes
	for in, want := range map[string]string{
		"report.pdf":                       "report.pdf",
		"../../etc/passwd.txt":             "passwd.txt",
		`C:\Users\bob\My Report.pdf`:       "My Report.pdf",
		"a\x00b\x07c\tname.txt":            "abcname.txt",
		"invoice\u202Efdp.exe":             "invoicefdp.exe",
		"x\u2066y\u2069z\u200b.csv":        "xyz.csv",
		"Cafe\u0301.txt":                   "Café.txt",
		"  spaced name.txt  ":              "spaced name.txt",
		"trailing dots...":                 "trailing dots",
		"bad\xffutf8.txt":                  "badutf8.txt",
		"dir/":                             "",
		long:                               strings.Repeat("é", 125) + ".docx",
		strings.Repeat("a", 300):           strings.Repeat("a", 255),
		strings.Repeat("b", 300) + ".json": strings.Repeat("b", 250) + ".json",
	} {
		got, err := filecheck.SanitizeName(in)
		if want == "" {
			require.Equal(t, filecheck.RuleNameEmpty, filecheck.RuleOf(err), "%q", in)
			continue
		}
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "%q", in)
		require.LessOrEqual(t, len(got), filecheck.MaxNameBytes)
	}
}

func TestGetContent(t *testing.T) {
	t.Parallel()
	c := filecheck.GetContent("../Résumé 2026.PDF")
	require.Equal(t, "application/pdf", c.ContentType)
	require.Equal(t, `attachment; filename="R_sum_ 2026.PDF"; filename*=UTF-8''R%C3%A9sum%C3%A9%202026.PDF`, c.ContentDisposition)

	c = filecheck.GetContent(`quote"s.txt`)
	require.Equal(t, "text/plain", c.ContentType)
	require.Equal(t, `attachment; filename="quote_s.txt"; filename*=UTF-8''quote%22s.txt`, c.ContentDisposition)

	c = filecheck.GetContent("tool.exe")
	require.Empty(t, c.ContentType, "only allowlisted extensions map to a type")
	require.NotEmpty(t, c.ContentDisposition)

	require.Equal(t, filecheck.Content{}, filecheck.GetContent(""))

	// ContentTypeOf is GetContent's type alone, for every kind of name.
	for _, name := range []string{"../Résumé 2026.PDF", `quote"s.txt`, "tool.exe", "", "a/b/photo.JPEG", "noext", ".", "x.\x00png"} {
		require.Equal(t, filecheck.GetContent(name).ContentType, filecheck.ContentTypeOf(name), "%q", name)
	}
}

// TestCheckStoredReadsABoundedHead: on a large text the stored-object check
// reads the leading bytes only, and still refuses a bad head.
func TestCheckStoredReadsABoundedHead(t *testing.T) {
	t.Parallel()
	p := filecheck.DefaultPolicy()
	big := bytes.Repeat([]byte("ok text ✓\n"), 100_000)
	_, n, err := p.CheckStored(filecheck.Meta{Name: "a.txt", Size: int64(len(big))}, bytes.NewReader(big))
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(3072))
	_, n, err = p.Check(filecheck.Meta{Name: "a.txt", Size: int64(len(big))}, bytes.NewReader(big))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(len(big)), "the buffer-upload check reads everything")

	bad := append([]byte("bad\x00"), big...)
	_, _, err = p.CheckStored(filecheck.Meta{Name: "a.txt", Size: int64(len(bad))}, bytes.NewReader(bad))
	require.Equal(t, filecheck.RuleContentNUL, filecheck.RuleOf(err))
	js := append([]byte("  <html>"), big...)
	_, _, err = p.CheckStored(filecheck.Meta{Name: "a.json", Size: int64(len(js))}, bytes.NewReader(js))
	require.Equal(t, filecheck.RuleContentJSON, filecheck.RuleOf(err))
	_, _, err = p.CheckStored(filecheck.Meta{Name: "d.docx", Size: int64(len(docx(t)))}, bytes.NewReader(docx(t)))
	require.NoError(t, err, "OOXML packages get the same structure check")
}
