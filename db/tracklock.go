package db

import (
	"context"
	"fmt"
	"time"
)

// HoldTrackLock takes the run lock key (TrackTryLock) on a connection of
// pool that it keeps for the run. held is false when another session
// holds it. release gives the lock and the connection back, on a context
// of its own (a cancelled run still unlocks); if the unlock fails, the
// connection is closed, which releases the lock with its session.
// Errors are classified (an unreachable database is an outage).
func HoldTrackLock(ctx context.Context, pool *Pool, key int64) (release func(), held bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("acquire a connection: %w", classify(err))
	}
	q := New()
	locked, err := q.TrackTryLock(ctx, conn, key)
	if err != nil || !locked {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("advisory lock: %w", classify(err))
		}
		return nil, false, nil
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := q.TrackUnlock(uctx, conn, key); err != nil {
			_ = conn.Conn().Close(uctx) // closing the session releases the lock
		}
		conn.Release()
	}, true, nil
}
