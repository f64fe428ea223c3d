package filecheck_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// rawEntry is one entry of a hand-built ZIP. Zero overrides mean "consistent
// with data".
type rawEntry struct {
	name   string
	data   []byte // written as the entry's (compressed) bytes
	method uint16
	flags  uint16

	cdCompSize, cdUncompSize *uint32 // directory sizes; default len(data)
	cdOffset                 *uint32 // directory local-header offset; default actual
	cdExtra                  []byte
	cdComment                []byte
	cdDiskStart              uint16
	localName                *string
	localFlags, localMethod  *uint16
	localExtra               []byte
	localSize                *uint32 // the local header's sizes; default len(data)
	localCRC                 *uint32 // the local header's CRC; default the data's
}

// rawZip builds a ZIP byte by byte, so a test can break exactly one rule.
type rawZip struct {
	entries []rawEntry

	disk, dirDisk   uint16
	diskEntries     *uint16
	totalEntries    *uint16
	dirOffsetDelta  int64
	dirSizeOverride *uint32
	zip64Locator    bool
	comment         []byte
}

func u16(v uint16) *uint16 { return &v }
func u32(v uint32) *uint32 { return &v }
func str(v string) *string { return &v }

func (z rawZip) bytes() []byte {
	var buf bytes.Buffer
	le := func(v any) { _ = binary.Write(&buf, binary.LittleEndian, v) }
	offsets := make([]uint32, len(z.entries))
	for i, e := range z.entries {
		offsets[i] = uint32(buf.Len())
		name := e.name
		if e.localName != nil {
			name = *e.localName
		}
		flags, method := e.flags, e.method
		if e.localFlags != nil {
			flags = *e.localFlags
		}
		if e.localMethod != nil {
			method = *e.localMethod
		}
		le(uint32(0x04034b50))
		le(uint16(20))
		le(flags)
		le(method)
		le(uint32(0)) // time, date
		crc := crc32.ChecksumIEEE(e.data)
		if e.localCRC != nil {
			crc = *e.localCRC
		}
		le(crc)
		size := uint32(len(e.data))
		if e.localSize != nil {
			size = *e.localSize
		}
		le(size)
		le(size)
		le(uint16(len(name)))
		le(uint16(len(e.localExtra)))
		buf.WriteString(name)
		buf.Write(e.localExtra)
		buf.Write(e.data)
	}
	dirStart := buf.Len()
	for i, e := range z.entries {
		comp, uncomp, off := uint32(len(e.data)), uint32(len(e.data)), offsets[i]
		if e.cdCompSize != nil {
			comp = *e.cdCompSize
		}
		if e.cdUncompSize != nil {
			uncomp = *e.cdUncompSize
		}
		if e.cdOffset != nil {
			off = *e.cdOffset
		}
		le(uint32(0x02014b50))
		le(uint16(20))
		le(uint16(20))
		le(e.flags)
		le(e.method)
		le(uint32(0))
		le(crc32.ChecksumIEEE(e.data))
		le(comp)
		le(uncomp)
		le(uint16(len(e.name)))
		le(uint16(len(e.cdExtra)))
		le(uint16(len(e.cdComment)))
		le(e.cdDiskStart)
		le(uint16(0))
		le(uint32(0))
		le(off)
		buf.WriteString(e.name)
		buf.Write(e.cdExtra)
		buf.Write(e.cdComment)
	}
	dirSize := uint32(buf.Len() - dirStart)
	if z.dirSizeOverride != nil {
		dirSize = *z.dirSizeOverride
	}
	if z.zip64Locator {
		le(uint32(0x07064b50))
		le(uint32(0))
		le(uint64(0))
		le(uint32(1))
	}
	n := uint16(len(z.entries))
	total, onDisk := n, n
	if z.totalEntries != nil {
		total = *z.totalEntries
	}
	if z.diskEntries != nil {
		onDisk = *z.diskEntries
	}
	le(uint32(0x06054b50))
	le(z.disk)
	le(z.dirDisk)
	le(onDisk)
	le(total)
	le(dirSize)
	le(uint32(int64(dirStart) + z.dirOffsetDelta))
	le(uint16(len(z.comment)))
	buf.Write(z.comment)
	return buf.Bytes()
}

// ooxmlEntries returns the two parts a minimal DOCX needs, stored.
func ooxmlEntries(mainPart string) []rawEntry {
	return []rawEntry{
		{name: "[Content_Types].xml", data: []byte(`<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`)},
		{name: mainPart, data: []byte(`<?xml version="1.0"?><document>hello</document>`)},
	}
}

// officeFile builds a real minimal OOXML package with archive/zip (deflate,
// data descriptors): what an office suite writes, in miniature.
func officeFile(t testing.TB, parts map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, name := range []string{"[Content_Types].xml", "_rels/.rels", "word/document.xml", "xl/workbook.xml", "ppt/presentation.xml", "docProps/app.xml"} {
		content, ok := parts[name]
		if !ok {
			continue
		}
		f, err := w.Create(name)
		require.NoError(t, err)
		_, err = f.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

const contentTypesXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/></Types>`

const relsXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="main.xml"/></Relationships>`

func docx(t testing.TB) []byte {
	return officeFile(t, map[string]string{"[Content_Types].xml": contentTypesXML, "_rels/.rels": relsXML,
		"word/document.xml": `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Quarterly plan</w:t></w:r></w:p></w:body></w:document>`})
}

func xlsx(t testing.TB) []byte {
	return officeFile(t, map[string]string{"[Content_Types].xml": contentTypesXML, "_rels/.rels": relsXML,
		"xl/workbook.xml": `<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheets><sheet name="Sheet1" sheetId="1"/></sheets></workbook>`})
}

func pptx(t testing.TB) []byte {
	return officeFile(t, map[string]string{"[Content_Types].xml": contentTypesXML, "_rels/.rels": relsXML,
		"ppt/presentation.xml": `<p:presentation xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"><p:sldIdLst/></p:presentation>`})
}
