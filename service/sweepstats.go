package service

import (
	"context"
	"sync/atomic"
)

// SweepStats counts what the maintenance operations did under a context
// (WithSweepStats): rows claimed (examined), finished (done) and released
// for a later retry (failed).
type SweepStats struct {
	Examined atomic.Int64
	Done     atomic.Int64
	Failed   atomic.Int64
}

type sweepStatsKey struct{}

// WithSweepStats returns ctx collecting the counts of the maintenance
// operations run under it into st.
func WithSweepStats(ctx context.Context, st *SweepStats) context.Context {
	return context.WithValue(ctx, sweepStatsKey{}, st)
}

func recordSweep(ctx context.Context, examined, done int) {
	if st, ok := ctx.Value(sweepStatsKey{}).(*SweepStats); ok {
		st.Examined.Add(int64(examined))
		st.Done.Add(int64(done))
		st.Failed.Add(int64(examined - done))
	}
}
