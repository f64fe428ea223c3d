package db

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
)

// EstimateRescan is the planner's estimate of how many files a rescan
// reads -- every tenant's files created at or after since (nil: any time),
// or tenant's when it is not nil -- from EXPLAIN of its batch statement
// with no limit to speak of (nothing is run, nothing is read): the total
// of a progress display, in the time a plan takes rather than a count of
// millions of rows.
func EstimateRescan(ctx context.Context, conn DBTX, since *time.Time, tenant *string) (int64, error) {
	var plan []byte
	var err error
	if tenant != nil {
		err = conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+fileRescanTenantBatch, *tenant, uuid.Nil, since, int32(math.MaxInt32)).Scan(&plan)
	} else {
		err = conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+fileRescanBatch, uuid.Nil, since, int32(math.MaxInt32)).Scan(&plan)
	}
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
