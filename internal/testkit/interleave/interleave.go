// Package interleave steps several PostgreSQL sessions through an order of
// statements the test chooses. A step runs on its session's own
// connection and returns as soon as the statement has finished or the
// session's backend is seen waiting on a lock (pg_stat_activity), so an
// interleaving -- A locks, B queues behind A, A commits, B goes on -- is
// decided by the test and observed in the database, never guessed with
// sleeps.
package interleave

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// stepBound bounds how long one step may run or wait before the test
// fails: a statement that neither finishes nor waits on a lock is a bug.
const stepBound = 30 * time.Second

// Session is one connection of the test, in a transaction once Begin ran.
type Session struct {
	t     testing.TB
	Name  string
	conn  *pgxpool.Conn
	watch *pgxpool.Pool
	pid   uint32
	tx    pgx.Tx
	// running is the step still in flight (blocked on a lock), or nil.
	running chan error
	// ctx is every step's context, cancelled when the test ends so that a
	// step still blocked then gives up.
	ctx    context.Context
	cancel context.CancelFunc
	// others are the backends a Caller's lock watch leaves out.
	others []int32
}

// Open takes a connection of its own from pool for a session called name;
// pool also watches it. The connection goes back when the test ends.
func Open(t testing.TB, pool *pgxpool.Pool, name string) *Session {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatalf("interleave: %s: acquire: %v", name, err)
	}
	s := &Session{t: t, Name: name, conn: conn, watch: pool, pid: conn.Conn().PgConn().PID()}
	s.ctx, s.cancel = context.WithCancel(ctx)
	t.Cleanup(func() {
		s.cancel()
		if s.running != nil {
			<-s.running //nolint:errcheck // cancelled: the step reported its own error
		}
		if s.tx != nil {
			_ = s.tx.Rollback(context.Background())
		}
		if s.conn.Conn().IsClosed() || s.ctx.Err() != nil && s.conn.Conn().PgConn().IsBusy() {
			s.conn.Conn().Close(context.Background()) //nolint:errcheck // a connection cut mid-statement is not reused
		}
		conn.Release()
	})
	return s
}

// Caller is a session for work that runs on connections of its own (a
// service call over its pool): its steps are Blocked while any backend of
// the database other than the watcher and the sessions in others waits on
// a lock. It has no connection or transaction of its own.
func Caller(t testing.TB, pool *pgxpool.Pool, name string, others ...*Session) *Session {
	t.Helper()
	s := &Session{t: t, Name: name, watch: pool}
	for _, o := range others {
		s.others = append(s.others, int32(o.pid))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() {
		s.cancel()
		if s.running != nil {
			<-s.running //nolint:errcheck // cancelled: the step reported its own error
		}
	})
	return s
}

// Begin opens the session's transaction (READ COMMITTED, as the service's).
func (s *Session) Begin() {
	s.t.Helper()
	tx, err := s.conn.Begin(context.Background())
	if err != nil {
		s.t.Fatalf("interleave: %s: begin: %v", s.Name, err)
	}
	s.tx = tx
}

// Tx is the session's transaction (Begin first).
func (s *Session) Tx() pgx.Tx { return s.tx }

// Outcome is what a step did by the time Step returned.
type Outcome int

// The outcomes of a step.
const (
	// Done: the step finished (its error, if any, is returned with it).
	Done Outcome = iota
	// Blocked: the step waits on a lock another session holds; Finish
	// waits for it.
	Blocked
)

func (o Outcome) String() string {
	if o == Blocked {
		return "blocked"
	}
	return "done"
}

// Step runs fn on the session and returns once fn has returned (Done,
// with its error) or the session's backend waits on a lock (Blocked; the
// step goes on, and Finish collects its error). A session runs one step at
// a time.
func (s *Session) Step(fn func(ctx context.Context) error) (Outcome, error) {
	s.t.Helper()
	if s.running != nil {
		s.t.Fatalf("interleave: %s: a step is still blocked; Finish it first", s.Name)
	}
	done := make(chan error, 1)
	go func() { done <- fn(s.ctx) }()
	deadline := time.Now().Add(stepBound)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return Done, err
		default:
		}
		if s.waitingOnLock() {
			// The statement may have been granted its lock between the
			// look and now: a finished step is still Done.
			select {
			case err := <-done:
				return Done, err
			default:
			}
			s.running = done
			return Blocked, nil
		}
		time.Sleep(time.Millisecond) // a poll of the database's state, not a guess at timing
	}
	s.t.Fatalf("interleave: %s: a step neither finished nor waited on a lock within %s", s.Name, stepBound)
	return Done, nil
}

// Exec is Step with one statement in the session's transaction (or on its
// connection before Begin).
func (s *Session) Exec(sql string, args ...any) (Outcome, error) {
	s.t.Helper()
	return s.Step(func(ctx context.Context) error {
		var err error
		if s.tx != nil {
			_, err = s.tx.Exec(ctx, sql, args...)
		} else {
			_, err = s.conn.Exec(ctx, sql, args...)
		}
		return err
	})
}

// Finish waits for the step that Step reported Blocked and returns its
// error; nil when no step is in flight.
func (s *Session) Finish() error {
	s.t.Helper()
	if s.running == nil {
		return nil
	}
	select {
	case err := <-s.running:
		s.running = nil
		return err
	case <-time.After(stepBound):
		s.t.Fatalf("interleave: %s: a blocked step did not finish within %s", s.Name, stepBound)
		return nil
	}
}

// Commit commits the session's transaction.
func (s *Session) Commit() error {
	s.t.Helper()
	err := s.tx.Commit(context.Background())
	s.tx = nil
	return err
}

// Rollback rolls the session's transaction back.
func (s *Session) Rollback() {
	s.t.Helper()
	_ = s.tx.Rollback(context.Background())
	s.tx = nil
}

// waitingOnLock reports whether the session's backend waits on a
// heavyweight lock (a row, a transaction, a relation, an advisory lock).
func (s *Session) waitingOnLock() bool {
	var waiting bool
	var err error
	if s.conn == nil { // a Caller: any other backend of the database
		err = s.watch.QueryRow(context.Background(), `SELECT count(*) > 0 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND NOT pid = ANY($1::int[])`, s.others).Scan(&waiting)
	} else {
		err = s.watch.QueryRow(context.Background(),
			"SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", s.pid).Scan(&waiting)
	}
	if err != nil {
		s.t.Fatalf("interleave: %s: read pg_stat_activity: %v", s.Name, err)
	}
	return waiting
}

// SQLState is err's SQLSTATE, or "" when err is not PostgreSQL's.
func SQLState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Order names the order two sessions run in ("A then B").
func Order(first, second *Session) string {
	return fmt.Sprintf("%s then %s", first.Name, second.Name)
}
