package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

type shareKey struct{}

func withShareKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, shareKey{}, key)
}

func shareKeyOf(ctx context.Context) string {
	k, _ := ctx.Value(shareKey{}).(string)
	return k
}

// TestSharedKeepsATenantToItsShare: on a pool of 4 connections with a
// share of 2 per tenant, tenant a's five slow calls hold two connections
// (the others queue behind them, on a's share, not on the pool), a
// transaction of a's holds its slot until it ends, and tenant b's call
// runs at once meanwhile. On the pool alone, a's calls would take all
// four connections and b's would wait for one of them to finish.
func TestSharedKeepsATenantToItsShare(t *testing.T) {
	t.Parallel()
	pool := poolOf(t, 4)
	c := db.Shared(pool, 2, shareKeyOf)
	ctx := context.Background()
	a, b := withShareKey(ctx, "a"), withShareKey(ctx, "b")
	sleeping := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND query LIKE '%tenant a sleeps%' AND pid <> pg_backend_pid()`).Scan(&n))
		return n
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Exec(a, "SELECT pg_sleep(1) -- tenant a sleeps"); err != nil {
				t.Error(err)
			}
		}()
	}
	require.Eventually(t, func() bool { return sleeping() == 2 }, 5*time.Second, 10*time.Millisecond, "a holds its share")
	var one int
	require.NoError(t, c.QueryRow(b, "SELECT 1").Scan(&one), "b runs meanwhile")
	require.Equal(t, 2, sleeping(), "a's other calls wait on its share, not on the pool")
	wg.Wait()

	// A transaction holds its slot until it ends.
	tx, err := c.Begin(a)
	require.NoError(t, err)
	tx2, err := c.Begin(a)
	require.NoError(t, err)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if _, err := c.Exec(a, "SELECT 1"); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-waited:
		t.Fatal("a third call of a ran while its two transactions held its share")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, c.QueryRow(b, "SELECT 1").Scan(&one), "b runs meanwhile")
	require.NoError(t, tx.Rollback(ctx))
	<-waited
	require.NoError(t, tx2.Commit(ctx))

	// A call that waits for its share no longer than its context allows.
	tx, err = c.Begin(a)
	require.NoError(t, err)
	tx2, err = c.Begin(a)
	require.NoError(t, err)
	requireShareFull(t, a, c, "out of time waiting for a's share")
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, tx2.Rollback(ctx))
}

// TestSharedGivesASlotBackOnce: a Rollback after the Commit (a deferred
// Rollback) and a second Close of rows give nothing back twice -- they
// return at once, and the share still holds its limit after them.
func TestSharedGivesASlotBackOnce(t *testing.T) {
	t.Parallel()
	pool := poolOf(t, 4)
	c := db.Shared(pool, 1, shareKeyOf)
	ctx := context.Background()
	a := withShareKey(ctx, "a")
	within := func(what string, fn func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not return", what)
		}
	}

	tx, err := c.Begin(a)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	var rollback error
	within("a Rollback after the Commit", func() { rollback = tx.Rollback(ctx) })
	require.ErrorIs(t, rollback, pgx.ErrTxClosed)
	rows, err := c.Query(a, "SELECT 1")
	require.NoError(t, err)
	rows.Close()
	within("a second Close", rows.Close)

	held, err := c.Begin(a)
	require.NoError(t, err)
	requireShareFull(t, a, c, "a's one slot is the transaction's")
	require.NoError(t, held.Rollback(ctx))
	_, err = c.Exec(a, "SELECT 1")
	require.NoError(t, err, "and free again once it ends")
}

// requireShareFull: a call of ctx's key on c, given 100 ms, fails waiting
// for a slot of its share.
func requireShareFull(t *testing.T, ctx context.Context, c db.Conn, msg string) {
	t.Helper()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := c.Exec(short, "SELECT 1")
	require.Error(t, err, msg)
}
