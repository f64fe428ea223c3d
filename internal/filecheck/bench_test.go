package filecheck_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
)

// BenchmarkCheck25MiB validates a 25 MiB file of each type, reporting
// throughput and allocations per validation.
func BenchmarkCheck25MiB(b *testing.B) {
	const size = 25 << 20
	p, err := filecheck.NewPolicy(nil, size, true)
	require.NoError(b, err)
	pad := func(head []byte) []byte { return append(head, bytes.Repeat([]byte{0x42}, size-len(head))...) }
	fill := func(line string) []byte { return []byte(strings.Repeat(line, size/len(line))) }
	text := fill("the quick brown fox jumps over the lazy dog ✓\n")
	csv := fill("id,name,city,amount\n1,Zoë,Köln,12.50\n")
	var js bytes.Buffer
	js.WriteString(`[`)
	for js.Len() < size-64 {
		js.WriteString(`{"id":12345,"name":"Zoë","tags":["a","b"],"ok":true},`)
	}
	js.WriteString(`{}]`)
	z := rawZip{entries: ooxmlEntries(docxMain)}
	z.entries = append(z.entries, rawEntry{name: "word/media/image1.png", data: bytes.Repeat([]byte{7}, size-4096)})

	for _, c := range []struct {
		name string
		body []byte
	}{
		{"report.pdf", pad([]byte(pdfBytes))},
		{"image.png", pad(pngBytes(b))},
		{"photo.jpg", pad(jpegBytes(b))},
		{"anim.gif", pad(gifBytes(b))},
		{"pic.webp", pad(webpBytes())},
		{"notes.txt", text},
		{"rows.csv", csv},
		{"data.json", js.Bytes()},
		{"plan.docx", z.bytes()},
	} {
		b.Run(c.name, func(b *testing.B) {
			meta := filecheck.Meta{Name: c.name, Size: int64(len(c.body))}
			r := bytes.NewReader(c.body)
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			var read int64
			for b.Loop() {
				_, n, err := p.Check(meta, r)
				if err != nil {
					b.Fatal(err)
				}
				read = n
			}
			b.ReportMetric(float64(read), "bytes-read/op")
		})
	}
}
