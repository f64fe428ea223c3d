package service_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/service"
)

// Example embeds the service: a pgx pool on a migrated database, the local
// driver, and a trusted request context for the acting user.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	root, _ := os.MkdirTemp("", "uploadedfile-example-*")
	defer os.RemoveAll(root)

	svc, err := service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: root}, pool)
	if err != nil {
		panic(err)
	}
	defer svc.Close()

	// Your authentication decides who acts; the service trusts the context.
	alice := service.WithRequestContext(ctx, service.RequestContext{Tenant: "acme", UserID: "alice"})
	f, err := svc.Upload(alice, strings.NewReader("id,amount\n1,42\n"), "rows.csv", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(f.OriginalName, f.ContentType, f.SizeBytes, f.Status, f.Visibility)
	// Output: rows.csv text/csv 15 ready private
}

// exampleService is a service over the examples' database and a fresh local
// root, with cfg's other options; close releases it.
func exampleService(cfg service.Config) (svc *service.Service, pool *pgxpool.Pool, close func()) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		panic(err)
	}
	root, _ := os.MkdirTemp("", "uploadedfile-example-*")
	cfg.Driver, cfg.LocalRoot, cfg.Host = service.DriverLocal, root, "https://files.example.com"
	svc, err = service.New(ctx, cfg, pool, service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		panic(err)
	}
	return svc, pool, func() { svc.Close(); pool.Close(); os.RemoveAll(root) }
}

// ExampleService_Upload stores a buffer upload: checked (name, type,
// content), written, then visible.
func ExampleService_Upload() {
	svc, _, done := exampleService(service.Config{})
	defer done()
	alice := service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "alice"})

	f, err := svc.Upload(alice, strings.NewReader("%PDF-1.4\n%%EOF\n"), "report.pdf", nil)
	fmt.Println(f.OriginalName, f.Status, err)

	_, err = svc.Upload(alice, strings.NewReader("MZ\x90\x00"), "tool.exe", nil)
	fmt.Println(err, service.Rule(err))
	// Output:
	// report.pdf ready <nil>
	// core.file.invalid-upload type.unknown-extension
}

// ExampleService_InitiateUpload runs the direct lifecycle: initiate, write
// the bytes to the upload target (here the local driver's content write;
// a client would PUT to init.Upload.URL with init.Upload.Headers), then
// complete, which verifies and promotes them.
func ExampleService_InitiateUpload() {
	svc, _, done := exampleService(service.Config{})
	defer done()
	alice := service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "alice"})

	body := []byte("id,amount\n1,42\n")
	sum := sha256.Sum256(body)
	init, err := svc.InitiateUpload(alice, service.InitiateInput{
		OriginalName: "rows.csv", ContentType: "text/csv", SizeBytes: int64(len(body)),
		Checksum: "sha256:" + base64.StdEncoding.EncodeToString(sum[:]),
	}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(init.File.Status, init.Upload.Method, init.Upload.Headers["Content-Type"])

	if _, err := svc.PutUploadContent(alice, init.ID.String(), bytes.NewReader(body)); err != nil {
		panic(err)
	}
	f, err := svc.CompleteUpload(alice, init.ID.String())
	fmt.Println(f.Status, f.SizeBytes, err)
	// Output:
	// pending PUT text/csv
	// ready 15 <nil>
}

// ExampleService_MarkUsed attaches files to a domain record inside the
// caller's own transaction: both commit or neither does.
func ExampleService_MarkUsed() {
	svc, pool, done := exampleService(service.Config{})
	defer done()
	alice := service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "alice"})
	f, _ := svc.Upload(alice, strings.NewReader("%PDF-1.4\n%%EOF\n"), "invoice.pdf", nil)

	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	// ... write the invoice row in tx ...
	err = svc.MarkUsed(alice, []string{f.ID.String()}, &service.Meta{Module: "billing", Entity: "invoice", EntityID: "inv-123"}, tx)
	fmt.Println(err)
	fmt.Println(tx.Commit(ctx))

	got, _ := svc.Find(alice, f.ID.String())
	fmt.Println(*got.Module, *got.Entity, *got.EntityID)
	// Output:
	// <nil>
	// <nil>
	// billing invoice inv-123
}

// ExampleService_DownloadAttached reads a file through its attachment, for
// anyone in the tenant the attached-read policy approves (deny by default).
func ExampleService_DownloadAttached() {
	svc, pool, done := exampleService(service.Config{
		AttachedReadPolicy: func(_ context.Context, req service.AttachedReadRequest) (bool, error) {
			return req.Attachment.Entity == "invoice", nil // your domain check goes here
		},
	})
	defer done()
	alice := service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "alice"})
	f, _ := svc.Upload(alice, strings.NewReader("%PDF-1.4\n%%EOF\n"), "invoice.pdf", nil)
	_ = svc.MarkUsed(alice, []string{f.ID.String()}, &service.Meta{Module: "billing", Entity: "invoice", EntityID: "inv-123"}, nil)
	_ = pool

	bob := service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "bob"})
	d, err := svc.DownloadAttached(bob, f.ID.String(), service.Attachment{Module: "billing", Entity: "invoice", EntityID: "inv-123"})
	if err != nil {
		panic(err)
	}
	defer d.Body.Close()
	b, _ := io.ReadAll(d.Body)
	fmt.Println(d.FileName, len(b))

	_, err = svc.DownloadAttached(bob, f.ID.String(), service.Attachment{Module: "billing", Entity: "invoice", EntityID: "inv-999"})
	fmt.Println(errors.Is(err, service.ErrNotFound))
	// Output:
	// invoice.pdf 15
	// true
}

// ExampleService_DeleteByID deletes a file durably: the claim is written
// before the bytes go, and the file is gone for every reader at once.
func ExampleService_DeleteByID() {
	svc, _, done := exampleService(service.Config{})
	defer done()
	alice := service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "alice"})
	f, _ := svc.Upload(alice, strings.NewReader("%PDF-1.4\n%%EOF\n"), "report.pdf", nil)

	fmt.Println(svc.DeleteByID(alice, f.ID.String()))
	_, err := svc.Find(alice, f.ID.String())
	fmt.Println(err)
	// Output:
	// <nil>
	// core.file.not-found
}

// List pages through the caller's files with a cursor; filters narrow it
// (here: the PDFs whose names start with "invoice", A to Z).
func ExampleService_List() {
	svc, _, done := exampleService(service.Config{})
	defer done()
	erin := service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "erin"})
	for _, name := range []string{"invoice-2.pdf", "notes.txt", "Invoice-1.pdf", "invoice-3.pdf"} {
		_, _ = svc.Upload(erin, strings.NewReader("%PDF-1.4\n%%EOF\n"), name, nil)
	}

	opts := service.ListOptions{NamePrefix: "invoice", ContentType: "application/pdf", Sort: service.SortName, Limit: 2}
	for {
		page, err := svc.List(erin, opts)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, f := range page.Files {
			fmt.Println(f.OriginalName)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	// Output:
	// Invoice-1.pdf
	// invoice-2.pdf
	// invoice-3.pdf
}
