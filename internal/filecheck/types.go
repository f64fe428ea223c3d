package filecheck

import (
	"mime"
	"net/url"
	"strings"
)

// The MIME types the service knows. Only these can ever be allowed; the
// configuration and each call can only narrow the set.
const (
	TypeJSON = "application/json"
	TypePDF  = "application/pdf"
	TypeZIP  = "application/zip"
	TypeDOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	TypeXLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	TypePPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
	TypeGIF  = "image/gif"
	TypeJPEG = "image/jpeg"
	TypePNG  = "image/png"
	TypeWebP = "image/webp"
	TypeCSV  = "text/csv"
	TypeText = "text/plain"
)

// kind says how a type's content is checked.
type kind int

const (
	kindBinary kind = iota // a signature in the leading bytes
	kindOOXML              // a ZIP with the OOXML structure
	kindText               // UTF-8 without NUL
	kindJSON               // UTF-8 JSON that parses
)

type fileType struct {
	mime       string
	extensions []string // first is canonical
	kind       kind
	mainPart   string   // OOXML only
	aliases    []string // declared types accepted as this one
}

var fileTypes = []fileType{
	{mime: TypeJSON, extensions: []string{"json"}, kind: kindJSON, aliases: []string{"text/json"}},
	{mime: TypePDF, extensions: []string{"pdf"}, kind: kindBinary, aliases: []string{"application/x-pdf"}},
	{mime: TypeZIP, extensions: []string{"zip"}, kind: kindBinary, aliases: []string{"application/x-zip-compressed", "application/x-zip"}},
	{mime: TypeDOCX, extensions: []string{"docx"}, kind: kindOOXML, mainPart: "word/document.xml"},
	{mime: TypeXLSX, extensions: []string{"xlsx"}, kind: kindOOXML, mainPart: "xl/workbook.xml"},
	{mime: TypePPTX, extensions: []string{"pptx"}, kind: kindOOXML, mainPart: "ppt/presentation.xml"},
	{mime: TypeGIF, extensions: []string{"gif"}, kind: kindBinary},
	{mime: TypeJPEG, extensions: []string{"jpg", "jpeg"}, kind: kindBinary, aliases: []string{"image/jpg", "image/pjpeg"}},
	{mime: TypePNG, extensions: []string{"png"}, kind: kindBinary},
	{mime: TypeWebP, extensions: []string{"webp"}, kind: kindBinary},
	{mime: TypeCSV, extensions: []string{"csv"}, kind: kindText, aliases: []string{"application/csv", "text/x-csv", "application/vnd.ms-excel"}},
	{mime: TypeText, extensions: []string{"txt"}, kind: kindText},
}

// DefaultAllowedMIMETypes is the documented default allowlist: every type above.
func DefaultAllowedMIMETypes() []string {
	out := make([]string, len(fileTypes))
	for i, t := range fileTypes {
		out[i] = t.mime
	}
	return out
}

func typeByMIME(m string) (fileType, bool) {
	for _, t := range fileTypes {
		if t.mime == m {
			return t, true
		}
	}
	return fileType{}, false
}

func typeByExtension(ext string) (fileType, bool) {
	ext = strings.ToLower(ext)
	for _, t := range fileTypes {
		for _, e := range t.extensions {
			if e == ext {
				return t, true
			}
		}
	}
	return fileType{}, false
}

// CanonicalMIME returns the known type a declared Content-Type names
// (parameters dropped, case folded, aliases resolved), or false.
func CanonicalMIME(declared string) (string, bool) {
	m, _, err := mime.ParseMediaType(declared)
	if err != nil {
		return "", false
	}
	for _, t := range fileTypes {
		if m == t.mime {
			return t.mime, true
		}
		for _, a := range t.aliases {
			if m == a {
				return t.mime, true
			}
		}
	}
	return "", false
}

func extensionOf(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return ""
	}
	return strings.ToLower(name[i+1:])
}

// Content is the response metadata of a file name: the allowlisted content
// type of its extension and an attachment disposition carrying the name.
// Fields are empty when unknown.
type Content struct {
	ContentType        string
	ContentDisposition string
}

// GetContent is a pure mapping of a file name's
// extension to its allowlisted content type, and an attachment disposition
// (RFC 6266: an ASCII fallback filename plus filename* in UTF-8). An empty
// name gives an empty Content; an extension outside the allowlist gives no
// content type.
func GetContent(fileName string) Content {
	name, err := SanitizeName(fileName)
	if err != nil {
		return Content{}
	}
	return Content{ContentType: typeOfSanitized(name), ContentDisposition: AttachmentDisposition(name)}
}

// ContentTypeOf is GetContent's content type alone, for a caller that
// builds its own disposition (a download: attachment or inline).
func ContentTypeOf(fileName string) string {
	name, err := SanitizeName(fileName)
	if err != nil {
		return ""
	}
	return typeOfSanitized(name)
}

// typeOfSanitized is the allowlisted content type of a sanitized name's
// extension ("" outside the allowlist).
func typeOfSanitized(name string) string {
	if t, ok := typeByExtension(extensionOf(name)); ok {
		return t.mime
	}
	return ""
}

// AttachmentDisposition returns `attachment; filename="<ascii>";
// filename*=UTF-8”<percent-encoded>` for a sanitized name.
func AttachmentDisposition(name string) string {
	return disposition("attachment", name)
}

// InlineDisposition is AttachmentDisposition with the inline type.
func InlineDisposition(name string) string {
	return disposition("inline", name)
}

// Disposition is InlineDisposition when inline, else
// AttachmentDisposition: how a download serves the file its row names.
func Disposition(name string, inline bool) string {
	if inline {
		return InlineDisposition(name)
	}
	return AttachmentDisposition(name)
}

func disposition(typ, name string) string {
	var ascii strings.Builder
	for _, r := range name {
		switch {
		case r == '"' || r == '\\':
			ascii.WriteByte('_')
		case r >= 0x20 && r < 0x7f:
			ascii.WriteRune(r)
		default:
			ascii.WriteByte('_')
		}
	}
	return typ + `; filename="` + ascii.String() + `"; filename*=UTF-8''` + strings.ReplaceAll(url.PathEscape(name), "'", "%27")
}
