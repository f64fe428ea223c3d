package main

import (
	"context"
	"fmt"
	"time"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/service"
)

// scaleSweepRows is how many rows each sweep takes at each size: about
// all the 100k table holds of its scarcest kind (expired temporary files,
// about 400), so both sizes time the same number of batches.
const scaleSweepRows = 400

// scaleSweepBatch is the batch each sweep call takes (the configured
// cleanupBatchSize's default).
const scaleSweepBatch = 100

// scaleSweeps are the sweeps bench-scale times per row at each size. They
// change the tables, so they run after every other measurement.
var scaleSweeps = []struct {
	name string
	run  func(ctx context.Context, s *service.Service) (int, error)
}{
	{"cleanup-temporary (expired temporary files)", func(ctx context.Context, s *service.Service) (int, error) {
		return s.CleanupExpiredTemporaryFiles(ctx, nil, scaleSweepBatch)
	}},
	{"pending (abandoned direct uploads, deletion retries, the rest)", func(ctx context.Context, s *service.Service) (int, error) {
		return s.CleanupPendingUploads(ctx, scaleSweepBatch)
	}},
	{"release abandoned uploads", func(ctx context.Context, s *service.Service) (int, error) {
		return s.ReleaseAbandonedUploads(ctx, scaleSweepBatch)
	}},
	{"retry-deletions (claims whose deleter died)", func(ctx context.Context, s *service.Service) (int, error) {
		return s.UnsafeSystemRetryPendingDeletions(ctx, scaleSweepBatch)
	}},
	{"purge of files unused for a week", func(ctx context.Context, s *service.Service) (int, error) {
		return s.UnsafeSystemPurgeUnusedBatch(ctx, time.Now().Add(-7*24*time.Hour), scaleSweepBatch)
	}},
}

// scaleSweepCosts times each sweep over scaleSweepRows rows at each size,
// one batch per size in turn, each pass starting with the next size
// (roundOrder: a drift of the disk's commit latency, and the aftermath of
// one batch's writes, fall on both alike): each pair of batches is a
// round, whose ratio is the cost per row at the large size over the cost
// at 100k. It reports the median round (goal ≤ 1.2×) with the worst
// beside it, as every compared row of the bench does, and the ratio of all
// the rows together. A sweep that runs out of rows at either size before
// scaleSweepRows fails: it would time fewer batches there.
func scaleSweepCosts(ctx context.Context, fs []*scaleFixture, large int, rep *report) error {
	for _, sw := range scaleSweeps {
		perRow := make([][]time.Duration, len(fs)) // each batch's cost per row, per size
		spent := make([]time.Duration, len(fs))
		done := make([]int, len(fs))
		for pass, left := 0, len(fs); left > 0; pass++ {
			for _, i := range roundOrder(pass, len(fs)) {
				f := fs[i]
				if done[i] >= scaleSweepRows {
					continue
				}
				start := time.Now()
				n, err := sw.run(db.ForSweeps(ctx), f.t.svc)
				took := time.Since(start)
				if err != nil {
					return fmt.Errorf("sweep %s at %d rows: %w", sw.name, f.t.total, err)
				}
				if n == 0 {
					return fmt.Errorf("sweep %s at %d rows: %d eligible rows, want %d", sw.name, f.t.total, done[i], scaleSweepRows)
				}
				spent[i] += took
				perRow[i] = append(perRow[i], took/time.Duration(n))
				if done[i] += n; done[i] >= scaleSweepRows {
					left--
				}
			}
		}
		rounds := min(len(perRow[0]), len(perRow[1]))
		ratios := make([]float64, rounds)
		for k := range rounds {
			ratios[k] = float64(perRow[1][k]) / float64(perRow[0][k])
		}
		d := costRatios(ratios)
		small, big := spent[0]/time.Duration(done[0]), spent[1]/time.Duration(done[1])
		rep.add(fmt.Sprintf("sweep %s: cost per row at %s files vs 100k", sw.name, count10(large)),
			fmt.Sprintf("%s (all rows %.2f×, %s vs %s per row)", d, float64(big)/float64(small), big.Round(time.Microsecond), small.Round(time.Microsecond)),
			"≤ 1.2×", d.median <= 1.2)
	}
	return nil
}
