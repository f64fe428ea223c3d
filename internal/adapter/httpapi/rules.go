package httpapi

import (
	"fmt"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/service"
)

// The rules of the multipart route's own refusals.
const (
	ruleMultipartNoFile  = "multipart.no-file"
	ruleMultipartTooMany = "multipart.too-many-files"
)

// The sentences of a size refusal that names its limit, and of a rule
// with no words of its own (none, while TestRuleCatalogue passes).
const (
	sizeLimitSentenceFmt = "The file is larger than the limit of %s."
	ruleSentenceFallback = "This file is not accepted."
)

// ruleSentences are the words a person reads for each rule a problem can
// name (the problem's detail): what the caller's own upload broke, and
// what to do. Every rule the code can emit has one, and docs/http.md
// lists every rule (TestRuleCatalogue holds the three together).
var ruleSentences = map[string]string{
	filecheck.RuleNameEmpty:          "The file has no name.",
	filecheck.RuleTypeUnknown:        "The file's name has no extension this service knows.",
	filecheck.RuleTypeNotAllowed:     "This type of file is not allowed here.",
	filecheck.RuleTypeDeclared:       "The declared content type is not the one the file's name says.",
	filecheck.RuleSizeEmpty:          "The file is empty.",
	filecheck.RuleSizeTooLarge:       "The file is larger than allowed.",
	filecheck.RuleContentSignature:   "The file's content does not start as its type says it must.",
	filecheck.RuleContentOtherType:   "The file's content is of another type than its name says.",
	filecheck.RuleContentUTF8:        "The text is not valid UTF-8.",
	filecheck.RuleContentNUL:         "The text contains NUL bytes.",
	filecheck.RuleContentJSON:        "The file is not valid JSON.",
	filecheck.RuleZipEncrypted:       "The document is encrypted; upload it without a password.",
	filecheck.RuleZipZip64:           "The document uses ZIP64, which is not accepted.",
	filecheck.RuleZipMultiDisk:       "The document is a multi-part archive, which is not accepted.",
	filecheck.RuleZipUnsafePath:      "The document holds an entry with an unsafe path.",
	filecheck.RuleZipDuplicatePath:   "The document holds two entries with the same path.",
	filecheck.RuleZipRatio:           fmt.Sprintf("An entry of the document compresses more than %d:1.", filecheck.MaxZipRatio),
	filecheck.RuleZipEntryTooLarge:   fmt.Sprintf("An entry of the document is larger than %s uncompressed.", humanBytes(int64(filecheck.MaxZipEntryUncompressed))),
	filecheck.RuleZipTotalTooLarge:   fmt.Sprintf("The document is larger than %s uncompressed.", humanBytes(int64(filecheck.MaxZipTotalUncompressed))),
	filecheck.RuleZipTooManyEntries:  fmt.Sprintf("The document holds more than %d entries.", filecheck.MaxZipEntries),
	filecheck.RuleZipOffsets:         "The document's directory points outside the file.",
	filecheck.RuleZipOverlap:         "The document's entries overlap.",
	filecheck.RuleZipMethod:          "An entry of the document uses a compression method that is not accepted.",
	filecheck.RuleZipSizes:           "An entry of the document declares sizes that do not add up.",
	filecheck.RuleZipLocalMismatch:   "An entry's header disagrees with the document's directory.",
	filecheck.RuleZipExtraField:      "An entry of the document has a malformed extra field.",
	filecheck.RuleZipContentTypes:    "The document has no [Content_Types].xml.",
	filecheck.RuleZipMainPart:        "The document lacks its main part.",
	filecheck.RuleZipNoEOCD:          "The document is not a complete ZIP archive.",
	filecheck.RuleZipDirectorySize:   "The document's directory is too large.",
	service.RuleContentMissing:       "The bytes have not arrived yet; send them to the upload target, then complete.",
	service.RuleContentMismatch:      "The bytes received are not the ones declared (their size or checksum differ).",
	service.RuleContentChanged:       "The uploaded object changed while it was being checked.",
	service.RuleContentWritten:       "The bytes of this upload were already sent.",
	service.RuleContentInfected:      "The file contains malware.",
	service.RuleContentUnscannable:   "The file could not be scanned (an encrypted or too deeply nested archive).",
	service.RuleScanUnavailable:      "The malware scanner did not answer; try again in a moment.",
	service.RuleQuotaTenantBytes:     "Your organisation's storage is full.",
	service.RuleQuotaTenantFiles:     "Your organisation has reached its number of files.",
	service.RuleQuotaOwnerBytes:      "Your storage is full.",
	service.RuleQuotaOwnerFiles:      "You have reached your number of files.",
	service.RuleVariantTooManyPixels: "The image has too many pixels to make a variant of.",
	service.RuleVariantAnimated:      "Variants of animated images are not made.",
	service.RuleVariantUndecodable:   "The image could not be decoded.",
	service.RuleStorageNoSpace:       "The file store has no space left; try again later.",
	service.RuleStorageReadOnly:      "The file store is read-only for now; try again later.",
	service.RuleStorageIOError:       "The file store failed to read or write; try again later.",
	ruleMultipartNoFile:              "The form has no part named file.",
	ruleMultipartTooMany:             "The form holds more than one file; send one per request.",
}

// ruleSentence is the detail of a problem that names rule, with the limit
// it broke when err carries one.
func ruleSentence(rule string, err error) string {
	if rule == filecheck.RuleSizeTooLarge {
		if limit := service.Limit(err); limit > 0 {
			return fmt.Sprintf(sizeLimitSentenceFmt, humanBytes(limit))
		}
	}
	if s, ok := ruleSentences[rule]; ok {
		return s
	}
	return ruleSentenceFallback
}

// humanBytes is n in the largest binary unit it fills: 10 MiB, 512 KiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
