package eventrelay_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/outage"
)

// TestRelayErrorsAreClassified: the relay runs its statements through the
// database's one classifier, as the service does: a database that refuses
// connections is an outage of the database to it, not a raw driver error.
func TestRelayErrorsAreClassified(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now: connections are refused
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+addr+"/none?connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r, err := eventrelay.New(pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{{Name: "hook", Sink: discard{}}}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, call := range map[string]func() error{
		"ensure": func() error { return r.Ensure(ctx) },
		"pass":   func() error { _, err := r.Pass(ctx); return err },
		"prune":  func() error { _, err := r.Prune(ctx); return err },
		"status": func() error { _, err := r.Status(ctx); return err },
	} {
		err := call()
		require.ErrorIs(t, err, outage.ErrUnavailable, "%s: %v", name, err)
	}
}

// discard acknowledges every event.
type discard struct{}

func (discard) Deliver(_ context.Context, events []eventrelay.Event) (int, error) {
	return len(events), nil
}
