package uploader_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/uploader"
)

// exampleServer is the server the examples upload to (a test server on a
// throw-away database: in your code, the URL of your uploadedfile and a
// token source of yours).
var exampleServer *server

func TestMain(m *testing.M) {
	url, drop, err := pgtest.Temporary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "the examples need PostgreSQL:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "uploader-example-*")
	if err != nil {
		panic(err)
	}
	s, stop, err := newServer(url, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the example server:", err)
		os.Exit(1)
	}
	exampleServer = s
	code := m.Run()
	stop()
	drop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func startExampleServer() *server { return exampleServer }

// Example uploads a file with the direct lifecycle: initiate, the bytes to
// the target, complete -- each retried under the upload's key.
func Example() {
	s := startExampleServer()
	c, err := uploader.New(s.url, s.token)
	if err != nil {
		panic(err)
	}
	body := "id,amount\n1,42\n"
	f, err := c.Upload(context.Background(), uploader.File{Name: "rows.csv", ContentType: "text/csv", Body: strings.NewReader(body), Size: int64(len(body))})
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Status, f.OriginalName, f.SizeBytes)
	// Output: ready rows.csv 15
}

// ExampleClient_BufferUpload sends a small file in one request.
func ExampleClient_BufferUpload() {
	s := startExampleServer()
	c, err := uploader.New(s.url, s.token)
	if err != nil {
		panic(err)
	}
	f, err := c.BufferUpload(context.Background(), "notes.txt", strings.NewReader("hello\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Status, f.OriginalName)
	// Output: ready notes.txt
}

// ExampleClient_Download reads a file back by the id its upload returned.
func ExampleClient_Download() {
	s := startExampleServer()
	c, err := uploader.New(s.url, s.token)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	f, err := c.BufferUpload(ctx, "notes.txt", strings.NewReader("hello\n"))
	if err != nil {
		panic(err)
	}
	got, err := c.Get(ctx, f.Id)
	if err != nil {
		panic(err)
	}
	body, err := c.Download(ctx, got.Id)
	if err != nil {
		panic(err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %q\n", got.OriginalName, b)
	// Output: notes.txt "hello\n"
}

// ExampleClient_ResumableUpload sends a file in chunks over the resumable
// route, keeping the upload's URL so that another process could go on
// from the server's offset (ResumableFile.URL).
func ExampleClient_ResumableUpload() {
	s := startExampleServer()
	c, err := uploader.New(s.url, s.token)
	if err != nil {
		panic(err)
	}
	rows := strings.Repeat("id,amount\n1,42\n", 10_000) // 150,000 bytes
	var url string
	f, err := c.ResumableUpload(context.Background(), uploader.ResumableFile{
		Name: "rows.csv", ContentType: "text/csv", Body: strings.NewReader(rows), Size: int64(len(rows)),
		ChunkSize: 64 << 10, OnCreated: func(u string) { url = u },
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Status, f.OriginalName, f.SizeBytes, strings.Contains(url, "/uploaded-file/tus/"+f.Id.String()))
	// Output: ready rows.csv 150000 true
}
