package main

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// PostgreSQL's CPU over a load is what its processes spent meanwhile: a
// backend that exits during the load (a pool closing an idle connection)
// takes away none of the time it had spent before, and one that starts
// counts whole. A sum over the processes alive at each end subtracted the
// exited backend's lifetime: the 64 KiB download floor's rows read 10 µs
// of PostgreSQL per request, 31-35 counted process by process.
func TestPostgresCPUSinceOutlivesAnExitedBackend(t *testing.T) {
	ctx := context.Background()
	busy := func() (*pgx.Conn, processID) {
		t.Helper()
		conn, err := pgx.Connect(ctx, pgtest.ServerURL())
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
			t.Fatal(err)
		}
		id, ok := postgresProcess(pid)
		if !ok {
			t.Fatalf("backend %d is not a postgres process", pid)
		}
		return conn, id
	}

	exiting, exitingID := busy()
	before := postgresProcesses()
	if before[exitingID] < 50*time.Millisecond {
		t.Fatalf("the first backend spent %v; the test needs it to have spent some", before[exitingID])
	}
	if err := exiting.Close(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(exitingID.pid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d has not exited", exitingID.pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	started, startedID := busy()
	defer started.Close(ctx)
	after := postgresProcesses()

	if got, least := after.since(before), after[startedID]; got < least {
		t.Errorf("PostgreSQL's CPU since: %v, less than the %v of the backend started meanwhile (the exited one had %v)", got, least, before[exitingID])
	}
}
