package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// IndexBuild is an index build running in the database, as
// pg_stat_progress_create_index reports it: a migration's CREATE INDEX
// CONCURRENTLY on a large table can take minutes, through phases that
// each count their own unit (lockers waited for, blocks scanned, tuples
// sorted or loaded).
type IndexBuild struct {
	Index string // the index being built ("" before it has a name)
	Table string
	Phase string // PostgreSQL's words: "building index: scanning table", ...
	Done  int64  // of the phase's unit
	Total int64  // 0: the phase does not count
	Unit  string // lockers, blocks, tuples or partitions
}

// Rows is what IndexBuilds needs of a connection.
type Rows interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// indexBuilds reads pg_stat_progress_create_index for the connection's
// database; each phase counts in the unit it reports (the first of
// lockers, blocks, tuples and partitions with a total).
const indexBuilds = `SELECT coalesce(i.relname, ''), coalesce(t.relname, ''), p.phase,
    p.lockers_done, p.lockers_total, p.blocks_done, p.blocks_total,
    p.tuples_done, p.tuples_total, p.partitions_done, p.partitions_total
FROM pg_stat_progress_create_index AS p
LEFT JOIN pg_class AS i ON i.oid = p.index_relid
LEFT JOIN pg_class AS t ON t.oid = p.relid
WHERE p.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY p.pid`

// IndexBuilds are the index builds running now in conn's database (none:
// an empty slice).
func IndexBuilds(ctx context.Context, conn Rows) ([]IndexBuild, error) {
	rows, err := conn.Query(ctx, indexBuilds)
	if err != nil {
		return nil, fmt.Errorf("migrations: read the index builds: %w", err)
	}
	out := []IndexBuild{}
	for rows.Next() {
		var b IndexBuild
		var counts [8]int64
		if err := rows.Scan(&b.Index, &b.Table, &b.Phase, &counts[0], &counts[1], &counts[2], &counts[3], &counts[4], &counts[5], &counts[6], &counts[7]); err != nil {
			rows.Close()
			return nil, fmt.Errorf("migrations: read the index builds: %w", err)
		}
		for i, unit := range []string{"lockers", "blocks", "tuples", "partitions"} {
			if counts[2*i+1] > 0 {
				b.Done, b.Total, b.Unit = counts[2*i], counts[2*i+1], unit
				break
			}
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrations: read the index builds: %w", err)
	}
	return out, nil
}
