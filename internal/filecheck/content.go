package filecheck

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"
)

// headSize is how many leading bytes signature detection reads.
const headSize = 3072

// textChunk is the read size of the streaming UTF-8 check.
const textChunk = 64 << 10

// textBuffers are the UTF-8 check's read buffers, reused across checks: a
// text upload is checked on every write, and a fresh buffer each time was a
// sixth of a small upload's allocations and of the collections they cause.
// A buffer holds nothing between checks that a check reads (every byte
// examined was read into it by that check).
var textBuffers = sync.Pool{New: func() any { b := make([]byte, textChunk+utf8.UTFMax); return &b }}

func (p Policy) checkContent(r Result, size int64, ra io.ReaderAt, bounded bool) error {
	t, _ := typeByMIME(r.ContentType)
	if t.kind == kindOOXML {
		if p.ValidateMagicBytes {
			var sig [4]byte
			if _, err := ra.ReadAt(sig[:], 0); err != nil || string(sig[:]) != "PK\x03\x04" {
				return invalid(RuleContentSignature, "not a ZIP package")
			}
		}
		return CheckOOXML(ra, size, t.mainPart)
	}
	if !p.ValidateMagicBytes {
		return nil
	}
	head := make([]byte, min(size, headSize))
	if _, err := ra.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	detected := mimetype.Detect(head)
	switch t.kind {
	case kindBinary:
		if isA(detected, t.mime) {
			return nil
		}
		if other, ok := knownType(detected); ok {
			return invalid(RuleContentOtherType, "the content is %s, not %s", other, t.mime)
		}
		return invalid(RuleContentSignature, "the content does not start with a %s signature", t.mime)
	default:
		if other, ok := knownType(detected); ok {
			if ot, _ := typeByMIME(other); ot.kind == kindBinary || ot.kind == kindOOXML {
				return invalid(RuleContentOtherType, "the content is %s, not %s", other, t.mime)
			}
		}
		if bounded && size > int64(len(head)) {
			return checkTextHead(head, t.kind == kindJSON)
		}
		if err := checkUTF8(io.NewSectionReader(ra, 0, size)); err != nil {
			return err
		}
		if t.kind == kindJSON {
			return checkJSON(io.NewSectionReader(ra, 0, size))
		}
		return nil
	}
}

// isA reports whether detected is want or, for ZIP, any ZIP-based format (a
// DOCX is a valid ZIP archive).
func isA(detected *mimetype.MIME, want string) bool {
	if detected.Is(want) {
		return true
	}
	if want != TypeZIP {
		return false
	}
	for m := detected.Parent(); m != nil; m = m.Parent() {
		if m.Is(TypeZIP) {
			return true
		}
	}
	return false
}

// knownType maps a detection (or its nearest known ancestor) to one of the
// service's types.
func knownType(detected *mimetype.MIME) (string, bool) {
	for m := detected; m != nil; m = m.Parent() {
		for _, t := range fileTypes {
			if m.Is(t.mime) {
				return t.mime, true
			}
		}
	}
	return "", false
}

// checkUTF8 streams r and refuses invalid UTF-8 and NUL bytes.
func checkUTF8(r io.Reader) error {
	pb := textBuffers.Get().(*[]byte)
	defer textBuffers.Put(pb)
	buf := *pb
	carry := 0
	for {
		n, err := io.ReadFull(r, buf[carry:carry+textChunk])
		chunk := buf[:carry+n]
		if bytes.IndexByte(chunk, 0) >= 0 {
			return invalid(RuleContentNUL, "text contains a NUL byte")
		}
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		// Keep an incomplete trailing sequence for the next round.
		valid := len(chunk)
		if !end {
			valid = lastCompleteBoundary(chunk)
		}
		if !utf8.Valid(chunk[:valid]) {
			return invalid(RuleContentUTF8, "text is not valid UTF-8")
		}
		if end {
			if valid != len(chunk) {
				return invalid(RuleContentUTF8, "text is not valid UTF-8")
			}
			return nil
		}
		if err != nil {
			return err
		}
		carry = copy(buf, chunk[valid:])
	}
}

// lastCompleteBoundary returns the length of the longest prefix of b that
// does not end inside a (possibly valid) multi-byte sequence.
func lastCompleteBoundary(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// checkTextHead checks the leading bytes of a larger text: no NUL, valid
// UTF-8 up to the last complete character, and for JSON a first character
// that can start a value.
func checkTextHead(head []byte, isJSON bool) error {
	if bytes.IndexByte(head, 0) >= 0 {
		return invalid(RuleContentNUL, "text contains a NUL byte")
	}
	if !utf8.Valid(head[:lastCompleteBoundary(head)]) {
		return invalid(RuleContentUTF8, "text is not valid UTF-8")
	}
	if isJSON {
		trimmed := bytes.TrimLeft(head, " \t\r\n")
		if len(trimmed) > 0 && !bytes.ContainsRune([]byte(`{["tfn-0123456789`), rune(trimmed[0])) {
			return invalid(RuleContentJSON, "not valid JSON")
		}
	}
	return nil
}
