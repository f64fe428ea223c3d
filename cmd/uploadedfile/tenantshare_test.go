package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// TestOneTenantsLocksLeaveOthersServed: one tenant's row is locked by a
// transaction that does not end and six of that tenant's deletes of it
// wait on it, each for up to 10 s (lock and call timeouts); on a pool of
// four connections they would hold every one, and another tenant's detail
// would wait for one of them to give up -- longer than its client's 3 s.
// With the tenant held to its share of the pool (two), the other tenant's
// detail answers 200 at once, throughout.
func TestOneTenantsLocksLeaveOthersServed(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat("s", 40)
	dbURL := pgtest.NewDatabase(t)
	d := startDevOn(t, dbURL, "auth:\n  hmacSecret: "+secret+`
database:
  maxConnections: 4
  maxConnectionsPerTenant: 2
  lockTimeout: 10s
  callTimeout: 10s
`)
	other, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "olga", "tenant": "other", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	require.NoError(t, err)
	idOf := func(body string) string {
		m := regexp.MustCompile(`"id":"([0-9a-f-]{36})"`).FindStringSubmatch(body)
		require.NotNil(t, m, body)
		return m[1]
	}
	status, body := d.bufferUpload(t, "locked.txt", []byte("a row its tenant cannot change\n"))
	require.Equal(t, http.StatusCreated, status, body)
	locked := idOf(body)
	theirs := d.withToken(other)
	status, body = theirs.bufferUpload(t, "theirs.txt", []byte("another tenant's file\n"))
	require.Equal(t, http.StatusCreated, status, body)
	mine := idOf(body)

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(context.Background(), "SELECT id FROM uploaded_file WHERE id = $1 FOR UPDATE", locked)
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodDelete, d.base+"/uploaded-file/"+locked, nil)
				req.Header.Set("Authorization", "Bearer "+d.token)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()); close(stop); wg.Wait() })
	require.Eventually(t, func() bool {
		var waiting int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return waiting >= 2
	}, 10*time.Second, 20*time.Millisecond, "the locked tenant's deletes wait on its row")

	for range 5 {
		req, err := http.NewRequest(http.MethodGet, d.base+"/uploaded-file/"+mine, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+other)
		resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
		require.NoError(t, err, "another tenant is answered while the first waits on its own lock")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "another tenant is served while the first waits on its own lock: %s", b)
		time.Sleep(300 * time.Millisecond)
	}
}

// withToken is d as a caller with token.
func (d *devServer) withToken(token string) *devServer {
	c := *d
	c.token = token
	return &c
}
