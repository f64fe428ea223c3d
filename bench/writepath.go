package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// benchWritePath measures a buffer upload's two statements alone, with no
// HTTP and no bytes: FileInsertHidden and FileActivateUpload as the service
// runs them for an upload alone (one transaction each; under concurrency
// the service commits them in groups, which the HTTP rows measure),
// against the lifecycle floor's two statements (insert a hidden row, activate
// it) on a table with one index and no constraint. It prints the
// throughput ratio and PostgreSQL's CPU per upload (every postgres process
// from /proc, before and after each load), once with every upload in one
// tenant -- each reservation locks the tenant's and the owner's usage row
// until its commit, so they queue -- and once spread over 32 tenants. It
// names, in each run, what the 64 KiB upload row's gap to the lifecycle floor is
// made of on the database's side.
func benchWritePath(ctx context.Context, rep *report) error {
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return err
	}
	defer drop()
	pool, err := pgxpool.New(ctx, pgtest.WithQuery(dsn, "pool_max_conns=32"))
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE spec_upload (id uuid PRIMARY KEY, name text NOT NULL, size bigint NOT NULL,
		checksum text, status text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	q := db.New()
	const size = 64 << 10
	sum := "sha256:" + strings.Repeat("A", 43) + "="
	spec := func(int) error {
		id := uuid.Must(uuid.NewV7())
		if _, err := pool.Exec(ctx, "INSERT INTO spec_upload (id, name, size, status) VALUES ($1, $2, 0, 'pending')", id, "data.csv"); err != nil {
			return err
		}
		_, err := pool.Exec(ctx, "UPDATE spec_upload SET status = 'ready', size = $2, checksum = $3, updated_at = now() WHERE id = $1 AND status = 'pending'", id, size, sum)
		return err
	}
	ours := func(tenants int) func(int) error {
		return func(i int) error {
			id := uuid.Must(uuid.NewV7())
			tenant := fmt.Sprintf("bench-%d", i%tenants)
			cdn := "urn:uploadedfile:" + id.String()
			row, err := q.InsertHiddenAlone(ctx, pool, db.FileInsertHiddenParams{
				ID: id, TenantCode: tenant, UserID: "bench", Key: "uploads/" + tenant + "/" + id.String() + ".csv", CDN: &cdn,
				OriginalName: "data.csv", SizeBytes: size, ContentType: "text/csv", Visibility: "private", Disposition: "attachment",
				Checksum: &sum, ExtraData: []byte("{}"), ActivationLease: service.ActivationLease,
			})
			if err != nil {
				return err
			}
			_, err = q.ActivateUploadAlone(ctx, pool, db.FileActivateUploadParams{ID: id, UploadMarker: *row.UploadPendingAt, Checksum: &sum})
			return err
		}
	}
	const n = 2000
	withCPU := func(fn func(int) error) func() stats {
		return func() stats {
			before := postgresProcesses()
			s := load(32, n, fn)
			s.dbCPU = postgresProcesses().since(before) / time.Duration(n)
			return s
		}
	}
	rs, m, err := measure("write path", withCPU(spec), withCPU(ours(1)), withCPU(ours(32)))
	if err != nil {
		return err
	}
	rep.add("upload statements alone (insert hidden + activate), 32 clients, one tenant: vs the lifecycle floor's two",
		fmt.Sprintf("%s (%.0f vs %.0f uploads/s; PostgreSQL CPU per upload %s vs %s)", ratioOf(rs, 1, 0), m[1].rps(), m[0].rps(), m[1].dbCPU.Round(time.Microsecond), m[0].dbCPU.Round(time.Microsecond)), "", true)
	rep.add("upload statements alone, 32 clients, 32 tenants: vs one tenant",
		fmt.Sprintf("%s (%.0f vs %.0f uploads/s; PostgreSQL CPU per upload %s vs %s)", ratioOf(rs, 2, 1), m[2].rps(), m[1].rps(), m[2].dbCPU.Round(time.Microsecond), m[1].dbCPU.Round(time.Microsecond)), "", true)
	return nil
}
