package filecheck_test

import (
	"bytes"
	"compress/flate"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
)

const docxMain = "word/document.xml"

func checkZip(b []byte, mainPart string) error {
	return filecheck.CheckOOXML(bytes.NewReader(b), int64(len(b)), mainPart)
}

func deflated(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	require.NoError(t, err)
	_, err = w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestOOXMLValidPackages(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		body []byte
		main string
	}{
		"docx (archive/zip)": {docx(t), "word/document.xml"},
		"xlsx (archive/zip)": {xlsx(t), "xl/workbook.xml"},
		"pptx (archive/zip)": {pptx(t), "ppt/presentation.xml"},
		"docx (hand-built)":  {rawZip{entries: ooxmlEntries(docxMain)}.bytes(), docxMain},
		"with a comment":     {rawZip{entries: ooxmlEntries(docxMain), comment: []byte("PK\x05\x06 not a record")}.bytes(), docxMain},
	} {
		require.NoError(t, checkZip(c.body, c.main), name)
	}
}

// TestOOXMLRules: one sample per rule, each failing for that rule alone.
func TestOOXMLRules(t *testing.T) {
	t.Parallel()
	base := func() rawZip { return rawZip{entries: ooxmlEntries(docxMain)} }
	with := func(f func(z *rawZip)) []byte { z := base(); f(&z); return z.bytes() }
	valid := base().bytes()

	manyEntries := base()
	for i := len(manyEntries.entries); i <= filecheck.MaxZipEntries; i++ {
		manyEntries.entries = append(manyEntries.entries, rawEntry{name: fmt.Sprintf("p/%d", i), data: []byte("x")})
	}

	big := bytes.Repeat([]byte{0}, 1<<20) // 1 MiB of "compressed" bytes: nothing is decompressed
	bomb := deflated(t, bytes.Repeat([]byte("A"), 200_000))

	samples := []struct {
		name string
		body []byte
		main string
		rule string
	}{
		{"truncated end record", valid[:len(valid)-10], docxMain, filecheck.RuleZipNoEOCD},
		{"not a zip at all", []byte("this is plain text, long enough to hold an end record"), docxMain, filecheck.RuleZipNoEOCD},
		{"zip64 locator", with(func(z *rawZip) { z.zip64Locator = true; z.dirOffsetDelta = 0 }), docxMain, filecheck.RuleZipZip64},
		{"zip64 extra field", with(func(z *rawZip) { z.entries[1].cdExtra = []byte{0x01, 0x00, 0x08, 0x00, 1, 2, 3, 4, 5, 6, 7, 8} }), docxMain, filecheck.RuleZipZip64},
		{"zip64 sentinel size", with(func(z *rawZip) { z.entries[1].cdUncompSize = u32(0xffffffff) }), docxMain, filecheck.RuleZipZip64},
		{"zip64 extra field in a local header", with(func(z *rawZip) {
			z.entries[1].localExtra = []byte{0x01, 0x00, 0x10, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}
		}), docxMain, filecheck.RuleZipZip64},
		{"zip64 extra field after another in a local header", with(func(z *rawZip) {
			z.entries[0].localExtra = []byte{0x55, 0x54, 0x05, 0x00, 1, 2, 3, 4, 5, 0x01, 0x00, 0x08, 0x00, 1, 2, 3, 4, 5, 6, 7, 8}
		}), docxMain, filecheck.RuleZipZip64},
		{"zip64 sentinel size in a local header", with(func(z *rawZip) { z.entries[1].localSize = u32(0xffffffff) }), docxMain, filecheck.RuleZipZip64},
		{"zip64 sentinel entry count", with(func(z *rawZip) { z.totalEntries = u16(0xffff); z.diskEntries = u16(0xffff) }), docxMain, filecheck.RuleZipZip64},
		{"multi-disk record", with(func(z *rawZip) { z.disk = 1 }), docxMain, filecheck.RuleZipMultiDisk},
		{"entries on another disk", with(func(z *rawZip) { z.diskEntries = u16(1) }), docxMain, filecheck.RuleZipMultiDisk},
		{"entry starting on another disk", with(func(z *rawZip) { z.entries[0].cdDiskStart = 2 }), docxMain, filecheck.RuleZipMultiDisk},
		{"too many entries", manyEntries.bytes(), docxMain, filecheck.RuleZipTooManyEntries},
		{"central directory over 4 MiB", with(func(z *rawZip) {
			for i := range 70 { // 70 entries with 64 KiB comments each
				z.entries = append(z.entries, rawEntry{name: fmt.Sprintf("c/%d", i), data: []byte("x"), cdComment: bytes.Repeat([]byte{'c'}, 0xffff)})
			}
		}), docxMain, filecheck.RuleZipDirectorySize},
		{"directory offset plus size misses the end record", with(func(z *rawZip) { z.dirOffsetDelta = -1 }), docxMain, filecheck.RuleZipOffsets},
		{"entry count exceeds the directory", with(func(z *rawZip) { z.totalEntries, z.diskEntries = u16(3), u16(3) }), docxMain, filecheck.RuleZipOffsets},
		{"entry outside the file", with(func(z *rawZip) { z.entries[1].cdOffset = u32(1 << 30) }), docxMain, filecheck.RuleZipOffsets},
		{"entry data runs into the directory", with(func(z *rawZip) {
			z.entries[1].cdCompSize, z.entries[1].cdUncompSize, z.entries[1].localSize = u32(4096), u32(4096), u32(4096)
		}), docxMain, filecheck.RuleZipOffsets},
		{"overlapping-entry bomb", with(func(z *rawZip) {
			// Entry 0 claims its data runs over entry 1's header and data.
			n := uint32(len(z.entries[0].data) + 30 + len(z.entries[1].name) + len(z.entries[1].data))
			z.entries[0].cdCompSize, z.entries[0].cdUncompSize, z.entries[0].localSize = u32(n), u32(n), u32(n)
		}), docxMain, filecheck.RuleZipOverlap},
		{"local extra block overrunning its field, hiding a ZIP64 record", with(func(z *rawZip) {
			// A block declaring 0x20 bytes in a field of 13: a reader that
			// trusts the field's length sees the ZIP64 record behind it.
			z.entries[1].localExtra = []byte{0x55, 0x54, 0x20, 0x00, 0x01, 0x00, 0x08, 0x00, 1, 2, 3, 4, 5}
		}), docxMain, filecheck.RuleZipExtraField},
		{"central extra block overrunning its field", with(func(z *rawZip) { z.entries[0].cdExtra = []byte{0x55, 0x54, 0x09, 0x00, 1, 2} }), docxMain, filecheck.RuleZipExtraField},
		{"stray bytes after the last extra block", with(func(z *rawZip) { z.entries[1].localExtra = []byte{0x55, 0x54, 0x01, 0x00, 1, 9, 9} }), docxMain, filecheck.RuleZipExtraField},
		{"local sizes differ from the directory", with(func(z *rawZip) { z.entries[1].localSize = u32(uint32(len(z.entries[1].data)) - 1) }), docxMain, filecheck.RuleZipLocalMismatch},
		{"local CRC differs from the directory", with(func(z *rawZip) { z.entries[1].localCRC = u32(0xdeadbeef) }), docxMain, filecheck.RuleZipLocalMismatch},
		{"two entries sharing one local header", with(func(z *rawZip) {
			z.entries = append(z.entries, z.entries[1])
			z.entries[2].name = "word/other.xml"
			z.entries[2].cdOffset = u32(0) // entry 0's header: its name is not this entry's
		}), docxMain, filecheck.RuleZipLocalMismatch},
		{"encrypted entry (bit 0)", with(func(z *rawZip) { z.entries[1].flags = 0x1 }), docxMain, filecheck.RuleZipEncrypted},
		{"strong encryption (bit 6)", with(func(z *rawZip) { z.entries[1].flags = 0x41 }), docxMain, filecheck.RuleZipEncrypted},
		{"masked directory (bit 13)", with(func(z *rawZip) { z.entries[1].flags = 0x2000 }), docxMain, filecheck.RuleZipEncrypted},
		{"bzip2 method", with(func(z *rawZip) { z.entries[1].method = 12 }), docxMain, filecheck.RuleZipMethod},
		{"traversal path", with(func(z *rawZip) {
			z.entries = append(z.entries, rawEntry{name: "word/../../evil.xml", data: []byte("x")})
		}), docxMain, filecheck.RuleZipUnsafePath},
		{"absolute path", with(func(z *rawZip) { z.entries = append(z.entries, rawEntry{name: "/etc/passwd", data: []byte("x")}) }), docxMain, filecheck.RuleZipUnsafePath},
		{"drive letter", with(func(z *rawZip) { z.entries = append(z.entries, rawEntry{name: "C:/evil.xml", data: []byte("x")}) }), docxMain, filecheck.RuleZipUnsafePath},
		{"backslash", with(func(z *rawZip) { z.entries = append(z.entries, rawEntry{name: `word\evil.xml`, data: []byte("x")}) }), docxMain, filecheck.RuleZipUnsafePath},
		{"NUL in a path", with(func(z *rawZip) { z.entries = append(z.entries, rawEntry{name: "word/a\x00.xml", data: []byte("x")}) }), docxMain, filecheck.RuleZipUnsafePath},
		{"duplicate path, other case", with(func(z *rawZip) { z.entries = append(z.entries, rawEntry{name: "WORD/Document.XML", data: []byte("x")}) }), docxMain, filecheck.RuleZipDuplicatePath},
		{"entry over 50 MiB declared", with(func(z *rawZip) {
			z.entries = append(z.entries, rawEntry{name: "word/media/big.bin", data: big, method: 8, cdUncompSize: u32(51 << 20)})
		}), docxMain, filecheck.RuleZipEntryTooLarge},
		{"over 100 MiB declared in total", with(func(z *rawZip) {
			for i := range 3 {
				z.entries = append(z.entries, rawEntry{name: fmt.Sprintf("word/media/%d.bin", i), data: big, method: 8, cdUncompSize: u32(40 << 20)})
			}
		}), docxMain, filecheck.RuleZipTotalTooLarge},
		{"high-ratio entry", with(func(z *rawZip) {
			z.entries = append(z.entries, rawEntry{name: "word/media/bomb.bin", data: bomb, method: 8, cdUncompSize: u32(200_000)})
		}), docxMain, filecheck.RuleZipRatio},
		{"empty compressed data declaring bytes", with(func(z *rawZip) {
			z.entries = append(z.entries, rawEntry{name: "word/media/zero.bin", data: nil, method: 8, cdUncompSize: u32(10)})
		}), docxMain, filecheck.RuleZipRatio},
		{"stored entry with two sizes", with(func(z *rawZip) { z.entries[1].cdUncompSize = u32(uint32(len(z.entries[1].data)) + 1) }), docxMain, filecheck.RuleZipSizes},
		{"local method differs", with(func(z *rawZip) { z.entries[1].localMethod = u16(8) }), docxMain, filecheck.RuleZipLocalMismatch},
		{"local flags differ", with(func(z *rawZip) { z.entries[1].localFlags = u16(0x800) }), docxMain, filecheck.RuleZipLocalMismatch},
		{"local name differs", with(func(z *rawZip) { z.entries[1].localName = str("word/documenX.xml") }), docxMain, filecheck.RuleZipLocalMismatch},
		{"no [Content_Types].xml", with(func(z *rawZip) { z.entries = z.entries[1:] }), docxMain, filecheck.RuleZipContentTypes},
		{"a DOCX checked as XLSX", valid, "xl/workbook.xml", filecheck.RuleZipMainPart},
		{"a DOCX checked as PPTX", docx(t), "ppt/presentation.xml", filecheck.RuleZipMainPart},
	}
	for _, s := range samples {
		err := checkZip(s.body, s.main)
		require.ErrorIs(t, err, filecheck.ErrInvalidUpload, s.name)
		require.Equal(t, s.rule, filecheck.RuleOf(err), "%s: %v", s.name, err)
	}
}

// TestOOXMLReadsLittle: the check reads the tail, the directory and the
// local headers, not the compressed data.
func TestOOXMLReadsLittle(t *testing.T) {
	t.Parallel()
	z := rawZip{entries: ooxmlEntries(docxMain)}
	z.entries = append(z.entries, rawEntry{name: "word/media/image1.png", data: bytes.Repeat([]byte{7}, 8<<20)})
	b := z.bytes()
	cr := &filecheck.CountingReaderAt{R: bytes.NewReader(b)}
	require.NoError(t, filecheck.CheckOOXML(cr, int64(len(b)), docxMain))
	require.Less(t, cr.N, int64(70_000), "read %d of %d bytes", cr.N, len(b))
}
