package db

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
)

// EstimateRescan is the planner's estimate of how many files a rescan of
// p's selection reads (EXPLAIN of FileRescanBatch with no limit to speak
// of: nothing is run, nothing is read): the total of a progress display,
// in the time a plan takes rather than a count of millions of rows.
func EstimateRescan(ctx context.Context, conn DBTX, p FileRescanBatchParams) (int64, error) {
	var plan []byte
	err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+fileRescanBatch, p.AfterID, p.Since, p.Tenant, int32(math.MaxInt32)).Scan(&plan)
	if err != nil {
		return 0, err
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	if err := json.Unmarshal(plan, &out); err != nil {
		return 0, fmt.Errorf("db: the rescan's plan: %w", err)
	}
	if len(out) == 0 {
		return 0, fmt.Errorf("db: the rescan's plan is empty: %s", plan)
	}
	return int64(out[0].Plan.Rows), nil
}
