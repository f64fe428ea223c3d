package filecheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sort"
	"strings"
)

// Bounds of the OOXML (DOCX, XLSX, PPTX) structure check.
const (
	MaxZipEntries           = 2048
	MaxZipTotalUncompressed = 100 << 20 // declared uncompressed bytes, all entries
	MaxZipEntryUncompressed = 50 << 20  // declared uncompressed bytes, one entry
	MaxZipRatio             = 100       // uncompressed : compressed, per entry
	maxCentralDirectory     = 4 << 20   // bytes; 2,048 entries of real packages need far less
)

const (
	sigLocal     = 0x04034b50
	sigCentral   = 0x02014b50
	sigEnd       = 0x06054b50
	sigZip64Loc  = 0x07064b50
	endLen       = 22
	centralLen   = 46
	localLen     = 30
	maxComment   = 0xffff
	flagEncrypt  = 0x0001
	flagDescript = 0x0008
	flagStrong   = 0x0040
	flagMasked   = 0x2000
	extraZip64   = 0x0001
)

type zipEntry struct {
	name       string
	flags      uint16
	method     uint16
	crc        uint32
	compSize   uint32
	uncompSize uint32
	offset     uint32
}

// CheckOOXML checks the structure of an OOXML package of size bytes read
// through ra: the end-of-central-directory record and the central directory
// are parsed here (not by archive/zip, which accepts far more), then every
// local header is cross-checked against its directory entry. Nothing is
// decompressed. It refuses ZIP64 and multi-disk archives, encryption,
// compression methods other than stored and deflate, more than 2,048
// entries, more than 100 MiB declared in total or 50 MiB in one entry, a
// compression ratio over 100:1, absolute, drive-letter, backslash, NUL and
// ".." paths, duplicate paths (case-insensitive), directory offsets that do
// not add up, entries outside the file or overlapping each other or the
// directory, and packages without [Content_Types].xml or mainPart.
//
// This is a structure check, not malware scanning. It reads the last bytes
// of the file, the central directory and each local header: a direct upload
// runs it over ranged reads of the stored object.
func CheckOOXML(ra io.ReaderAt, size int64, mainPart string) error {
	_, end, err := findEnd(ra, size)
	if err != nil {
		return err
	}
	dir, err := readDirectory(ra, end)
	if err != nil {
		return err
	}
	entries, err := parseDirectory(dir, int(end.entries))
	if err != nil {
		return err
	}
	if err := checkEntries(entries); err != nil {
		return err
	}
	if err := checkLayout(ra, entries, int64(end.dirOffset)); err != nil {
		return err
	}
	return checkParts(entries, mainPart)
}

type endRecord struct {
	disk, dirDisk, diskEntries, entries uint16
	dirSize, dirOffset                  uint32
}

// findEnd locates the end-of-central-directory record: the last signature
// whose comment length reaches exactly to the end of the file.
func findEnd(ra io.ReaderAt, size int64) (int64, endRecord, error) {
	if size < endLen {
		return 0, endRecord{}, invalid(RuleZipNoEOCD, "too small to be a ZIP")
	}
	tailLen := min(size, endLen+maxComment)
	tail := make([]byte, tailLen)
	if _, err := ra.ReadAt(tail, size-tailLen); err != nil && !errors.Is(err, io.EOF) {
		return 0, endRecord{}, err
	}
	for i := len(tail) - endLen; i >= 0; i-- {
		if binary.LittleEndian.Uint32(tail[i:]) != sigEnd {
			continue
		}
		rec := tail[i : i+endLen]
		if int(binary.LittleEndian.Uint16(rec[20:])) != len(tail)-i-endLen {
			continue
		}
		end := endRecord{
			disk:        binary.LittleEndian.Uint16(rec[4:]),
			dirDisk:     binary.LittleEndian.Uint16(rec[6:]),
			diskEntries: binary.LittleEndian.Uint16(rec[8:]),
			entries:     binary.LittleEndian.Uint16(rec[10:]),
			dirSize:     binary.LittleEndian.Uint32(rec[12:]),
			dirOffset:   binary.LittleEndian.Uint32(rec[16:]),
		}
		endOff := size - tailLen + int64(i)
		return endOff, end, checkEnd(tail[:i], end, endOff)
	}
	return 0, endRecord{}, invalid(RuleZipNoEOCD, "no end-of-central-directory record")
}

func checkEnd(before []byte, end endRecord, endOff int64) error {
	if len(before) >= 20 && binary.LittleEndian.Uint32(before[len(before)-20:]) == sigZip64Loc {
		return invalid(RuleZipZip64, "ZIP64 locator present")
	}
	if end.entries == 0xffff || end.diskEntries == 0xffff || end.dirSize == 0xffffffff || end.dirOffset == 0xffffffff {
		return invalid(RuleZipZip64, "ZIP64 sentinel in the end record")
	}
	if end.disk != 0 || end.dirDisk != 0 || end.diskEntries != end.entries {
		return invalid(RuleZipMultiDisk, "multi-disk archive")
	}
	if end.entries > MaxZipEntries {
		return invalid(RuleZipTooManyEntries, "%d entries, at most %d", end.entries, MaxZipEntries)
	}
	if int64(end.dirOffset)+int64(end.dirSize) != endOff {
		return invalid(RuleZipOffsets, "central directory does not end where the end record starts")
	}
	if end.dirSize > maxCentralDirectory {
		return invalid(RuleZipDirectorySize, "central directory of %d bytes", end.dirSize)
	}
	return nil
}

func readDirectory(ra io.ReaderAt, end endRecord) ([]byte, error) {
	dir := make([]byte, end.dirSize)
	if n, err := ra.ReadAt(dir, int64(end.dirOffset)); n != len(dir) || (err != nil && !errors.Is(err, io.EOF)) {
		return nil, invalid(RuleZipOffsets, "central directory outside the file")
	}
	return dir, nil
}

// parseDirectory reads exactly n entries filling the directory exactly.
func parseDirectory(dir []byte, n int) ([]zipEntry, error) {
	entries := make([]zipEntry, 0, n)
	p := dir
	for range n {
		if len(p) < centralLen || binary.LittleEndian.Uint32(p) != sigCentral {
			return nil, invalid(RuleZipOffsets, "central directory entry %d is malformed", len(entries))
		}
		nameLen := int(binary.LittleEndian.Uint16(p[28:]))
		extraLen := int(binary.LittleEndian.Uint16(p[30:]))
		commentLen := int(binary.LittleEndian.Uint16(p[32:]))
		total := centralLen + nameLen + extraLen + commentLen
		if len(p) < total {
			return nil, invalid(RuleZipOffsets, "central directory entry %d overruns the directory", len(entries))
		}
		e := zipEntry{
			name:       string(p[centralLen : centralLen+nameLen]),
			flags:      binary.LittleEndian.Uint16(p[8:]),
			method:     binary.LittleEndian.Uint16(p[10:]),
			crc:        binary.LittleEndian.Uint32(p[16:]),
			compSize:   binary.LittleEndian.Uint32(p[20:]),
			uncompSize: binary.LittleEndian.Uint32(p[24:]),
			offset:     binary.LittleEndian.Uint32(p[42:]),
		}
		if binary.LittleEndian.Uint16(p[34:]) != 0 {
			return nil, invalid(RuleZipMultiDisk, "entry %q starts on another disk", e.name)
		}
		if err := checkExtra(p[centralLen+nameLen:centralLen+nameLen+extraLen], e.name, "central"); err != nil {
			return nil, err
		}
		entries = append(entries, e)
		p = p[total:]
	}
	if len(p) != 0 {
		return nil, invalid(RuleZipOffsets, "central directory has %d bytes beyond its entries", len(p))
	}
	return entries, nil
}

// checkExtra walks an extra field block by block: each block's declared
// length must fit in what is left, and nothing may trail the last block
// (a reader that walked it otherwise could find a ZIP64 record this walk
// does not see). A ZIP64 block is refused as ZIP64 itself.
func checkExtra(extra []byte, name, where string) error {
	for len(extra) > 0 {
		if len(extra) < 4 {
			return invalid(RuleZipExtraField, "entry %q: %d stray bytes at the end of its %s extra field", name, len(extra), where)
		}
		id := binary.LittleEndian.Uint16(extra)
		size := int(binary.LittleEndian.Uint16(extra[2:]))
		if len(extra) < 4+size {
			return invalid(RuleZipExtraField, "entry %q: a block of its %s extra field overruns it", name, where)
		}
		if id == extraZip64 {
			return invalid(RuleZipZip64, "entry %q has a ZIP64 extra field in its %s header", name, where)
		}
		extra = extra[4+size:]
	}
	return nil
}

// checkEntries applies the per-entry and total rules of the directory.
func checkEntries(entries []zipEntry) error {
	seen := make(map[string]struct{}, len(entries))
	var total int64
	for _, e := range entries {
		if e.flags&(flagEncrypt|flagStrong|flagMasked) != 0 {
			return invalid(RuleZipEncrypted, "entry %q is encrypted", e.name)
		}
		if e.method != 0 && e.method != 8 {
			return invalid(RuleZipMethod, "entry %q uses compression method %d", e.name, e.method)
		}
		if e.compSize == 0xffffffff || e.uncompSize == 0xffffffff || e.offset == 0xffffffff {
			return invalid(RuleZipZip64, "entry %q has a ZIP64 sentinel", e.name)
		}
		if err := checkPath(e.name); err != nil {
			return err
		}
		folded := strings.ToLower(e.name)
		if _, dup := seen[folded]; dup {
			return invalid(RuleZipDuplicatePath, "path %q appears twice", e.name)
		}
		seen[folded] = struct{}{}
		if e.uncompSize > MaxZipEntryUncompressed {
			return invalid(RuleZipEntryTooLarge, "entry %q declares %d bytes", e.name, e.uncompSize)
		}
		if total += int64(e.uncompSize); total > MaxZipTotalUncompressed {
			return invalid(RuleZipTotalTooLarge, "entries declare more than %d bytes in total", MaxZipTotalUncompressed)
		}
		if e.method == 0 && e.compSize != e.uncompSize {
			return invalid(RuleZipSizes, "stored entry %q has different sizes", e.name)
		}
		if e.uncompSize > 0 && int64(e.uncompSize) > MaxZipRatio*int64(e.compSize) {
			return invalid(RuleZipRatio, "entry %q expands more than %d:1", e.name, MaxZipRatio)
		}
	}
	return nil
}

func checkPath(name string) error {
	switch {
	case name == "":
		return invalid(RuleZipUnsafePath, "empty path")
	case strings.ContainsAny(name, "\x00\\"):
		return invalid(RuleZipUnsafePath, "path %q has a NUL or backslash", name)
	case strings.HasPrefix(name, "/"):
		return invalid(RuleZipUnsafePath, "absolute path %q", name)
	case len(name) >= 2 && name[1] == ':' && (name[0]|0x20) >= 'a' && (name[0]|0x20) <= 'z':
		return invalid(RuleZipUnsafePath, "drive-letter path %q", name)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return invalid(RuleZipUnsafePath, "path %q leaves the package", name)
		}
	}
	return nil
}

// span is the byte range one entry occupies: local header, name, extra,
// data and data descriptor.
type span struct {
	start, end int64
	name       string
}

// checkLayout reads each local header, cross-checks it against its
// directory entry, and refuses entries outside [0, dirOffset) or
// overlapping each other.
func checkLayout(ra io.ReaderAt, entries []zipEntry, dirOffset int64) error {
	spans := make([]span, 0, len(entries))
	hdr := make([]byte, localLen)
	for _, e := range entries {
		start := int64(e.offset)
		if start+localLen > dirOffset {
			return invalid(RuleZipOffsets, "entry %q starts outside the data area", e.name)
		}
		if _, err := ra.ReadAt(hdr, start); err != nil {
			return invalid(RuleZipOffsets, "entry %q header unreadable", e.name)
		}
		if binary.LittleEndian.Uint32(hdr) != sigLocal {
			return invalid(RuleZipLocalMismatch, "entry %q has no local header", e.name)
		}
		flags := binary.LittleEndian.Uint16(hdr[6:])
		method := binary.LittleEndian.Uint16(hdr[8:])
		nameLen := int64(binary.LittleEndian.Uint16(hdr[26:]))
		extraLen := int64(binary.LittleEndian.Uint16(hdr[28:]))
		if flags != e.flags || method != e.method || nameLen != int64(len(e.name)) {
			return invalid(RuleZipLocalMismatch, "entry %q: local header differs from the directory", e.name)
		}
		if binary.LittleEndian.Uint32(hdr[18:]) == 0xffffffff || binary.LittleEndian.Uint32(hdr[22:]) == 0xffffffff {
			return invalid(RuleZipZip64, "entry %q has a ZIP64 sentinel in its local header", e.name)
		}
		// Without a data descriptor the local header states the CRC and
		// sizes itself: a reader that trusts it must read what the
		// directory says.
		if flags&flagDescript == 0 && (binary.LittleEndian.Uint32(hdr[14:]) != e.crc ||
			binary.LittleEndian.Uint32(hdr[18:]) != e.compSize || binary.LittleEndian.Uint32(hdr[22:]) != e.uncompSize) {
			return invalid(RuleZipLocalMismatch, "entry %q: local CRC or sizes differ from the directory", e.name)
		}
		if start+localLen+nameLen+extraLen > dirOffset {
			return invalid(RuleZipOffsets, "entry %q name outside the data area", e.name)
		}
		// The name and the extra field in one read: the local extra is where
		// a ZIP64 record hides from a check of the directory alone.
		nameExtra := make([]byte, nameLen+extraLen)
		if _, err := ra.ReadAt(nameExtra, start+localLen); err != nil || !bytes.Equal(nameExtra[:nameLen], []byte(e.name)) {
			return invalid(RuleZipLocalMismatch, "entry %q: local name differs", e.name)
		}
		if err := checkExtra(nameExtra[nameLen:], e.name, "local"); err != nil {
			return err
		}
		end := start + localLen + nameLen + extraLen + int64(e.compSize)
		if e.flags&flagDescript != 0 {
			end += 12 // the smallest data descriptor (CRC, sizes)
		}
		if end > dirOffset {
			return invalid(RuleZipOffsets, "entry %q data runs into the central directory", e.name)
		}
		spans = append(spans, span{start, end, e.name})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return invalid(RuleZipOverlap, "entries %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	return nil
}

func checkParts(entries []zipEntry, mainPart string) error {
	var contentTypes, main bool
	for _, e := range entries {
		contentTypes = contentTypes || e.name == "[Content_Types].xml"
		main = main || e.name == mainPart
	}
	if !contentTypes {
		return invalid(RuleZipContentTypes, "no [Content_Types].xml")
	}
	if !main {
		return invalid(RuleZipMainPart, "no %s", mainPart)
	}
	return nil
}
