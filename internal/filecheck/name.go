package filecheck

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxNameBytes bounds a sanitized file name.
const MaxNameBytes = 255

// SanitizeName returns the name a file is stored and served under: the last
// path segment (both / and \ separate directories), without control
// characters, NUL, bidirectional overrides and other invisible format
// characters, in Unicode NFC, without surrounding spaces or dots, and at
// most MaxNameBytes bytes -- cut on a character boundary, keeping the
// extension. A name with nothing left is core.file.invalid-upload.
func SanitizeName(name string) (string, error) {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.ToValidUTF8(name, "")
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return -1 // includes NUL, bidi overrides (U+202A..U+202E, U+2066..U+2069), zero-width marks
		}
		return r
	}, name)
	name = norm.NFC.String(name)
	name = strings.Trim(name, " .")
	if name == "" {
		return "", invalid(RuleNameEmpty, "the file name is empty once sanitized")
	}
	return truncateKeepingExtension(name, MaxNameBytes), nil
}

// truncateKeepingExtension cuts name to at most limit bytes on a rune
// boundary, keeping a short extension when there is one.
func truncateKeepingExtension(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	ext := ""
	if i := strings.LastIndexByte(name, '.'); i > 0 && len(name)-i <= 17 {
		ext = name[i:]
	}
	base := name[:len(name)-len(ext)]
	budget := limit - len(ext)
	for budget > 0 && !utf8.RuneStart(base[budget]) {
		budget--
	}
	return strings.TrimRight(base[:budget], " .") + ext
}
