package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// lockWriters is how many of the locked tenant's requests wait on its rows
// at once: more than the server's request pool holds connections (32), so
// nothing but the bounds on a lock wait keeps them from taking every one.
const lockWriters = 48

// benchTenantLock measures one tenant's reads while another tenant's rows
// are locked by a transaction that does not end and that tenant's writers
// (deletes, lockWriters at a time, each again as soon as it is answered)
// queue on them: its detail and usage at 8 clients against the same with
// nothing locked, in interleaved rounds, the p99 latencies' ratio (the
// median round's, with the worst). A lock wait is bounded
// (database.lockTimeout), so the writers are answered 503 and free their
// connections instead of holding the pool.
func benchTenantLock(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	srv, stop, err := startVariant(ctx, bin, tmp, "tenantlock", secret, "")
	if err != nil {
		return err
	}
	defer stop()
	quiet := &env{uf: srv, token: e.tenantTokens[0]}
	locked := &env{uf: srv, token: e.tenantTokens[1]}
	quietIDs, err := seed(quiet, 50)
	if err != nil {
		return err
	}
	lockedIDs, err := seed(locked, 50)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, srv.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, route := range []struct {
		name string
		call func(i int) error
	}{
		{"detail", func(i int) error { return quiet.detail(quietIDs[i%len(quietIDs)]) }},
		{"usage", func(int) error {
			_, err := do(quiet.authed(http.MethodGet, srv.url+"/uploaded-file/usage", nil), http.StatusOK)
			return err
		}},
	} {
		reads := func() stats { return load(8, 1000, route.call) }
		contended := func() stats {
			release, err := lockTenant(ctx, pool, locked, lockedIDs)
			if err != nil {
				return stats{n: 1, errors: 1, firstErr: err, elapsed: time.Second}
			}
			defer release()
			return reads()
		}
		rs, m, err := measure("tenant lock "+route.name, reads, contended)
		if err != nil {
			return err
		}
		d := p99RatioOf(rs, 1, 0)
		rep.add(fmt.Sprintf("another tenant's %s, 8 clients, while one tenant's rows are locked (%d writers waiting on them) vs nothing locked: p99", route.name, lockWriters),
			fmt.Sprintf("%s (p99 %s vs %s)", d, m[1].p99.Round(10*time.Microsecond), m[0].p99.Round(10*time.Microsecond)), "≤ 2.0×", d.median <= 2)
	}
	return nil
}

// seed uploads n small files as e and returns their ids.
func seed(e *env, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		id, err := e.uploadNamed(e.uf.url, fmt.Sprintf("seed-%d.csv", i), payload(1<<10))
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// lockTenant locks every row of the tenant of e (ids are its files) in a
// transaction it keeps open, and starts lockWriters of its deletes, each
// sent again as soon as it is answered; release stops them and ends the
// transaction.
func lockTenant(ctx context.Context, pool *pgxpool.Pool, e *env, ids []string) (release func(), err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SELECT id FROM uploaded_file WHERE id = ANY($1::uuid[]) FOR UPDATE", ids); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range lockWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Refused after the lock timeout (503): the row stays.
				_, _ = do(e.authed(http.MethodDelete, e.uf.url+"/uploaded-file/"+ids[i%len(ids)], nil), http.StatusNoContent)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the writers queue on the rows
	return func() {
		// The writers stop first: each waiting one is refused at its lock
		// timeout, so none deletes a row once the lock is gone.
		close(stop)
		wg.Wait()
		_ = tx.Rollback(ctx)
	}, nil
}

// p99RatioOf is load a's p99 latency over load b's, round by round; lower
// is better, so the worst round is the highest ratio.
func p99RatioOf(rs [][]stats, a, b int) ratioDist {
	rat := make([]float64, len(rs))
	for i, r := range rs {
		rat[i] = float64(r[a].p99) / float64(r[b].p99)
	}
	return costRatios(rat)
}
