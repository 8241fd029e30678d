package pgcatalog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/types"
)

// pg_stat_progress_create_index: one row per running index build (a job
// of type CREATE INDEX, sql/ddl index_job.go) of the current database, on
// any node, as its job record last said. PostgreSQL shows only its own
// node's backends; Cairn's builds are cluster-wide jobs, so every node
// shows every build. Blocks and lockers are not counted (0); tuples are
// the rows the backfill has read and the table's rows when it started
// (0 until counted).
func init() {
	define("pg_catalog", "pg_stat_progress_create_index", 12320, true,
		`pid:integer datid:oid datname:name relid:oid index_relid:oid command:text phase:text lockers_total:bigint lockers_done:bigint current_locker_pid:bigint blocks_total:bigint blocks_done:bigint tuples_total:bigint tuples_done:bigint partitions_total:bigint partitions_done:bigint`,
		genProgressCreateIndex)
}

// indexBuildProgress is the part of sql/ddl.IndexProgress (a build job's
// payload) the view shows.
type indexBuildProgress struct {
	TableID     uint32 `json:"table_id"`
	IndexID     uint32 `json:"index_id"`
	Database    uint32 `json:"database_id"`
	Phase       string `json:"phase"`
	TuplesTotal int64  `json:"tuples_total"`
	TuplesDone  int64  `json:"tuples_done"`
	Concurrent  bool   `json:"concurrent"`
	PID         int32  `json:"pid"`
}

func genProgressCreateIndex(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	if s.env.Txn == nil {
		return nil, nil
	}
	recs, err := jobs.List(ctx, s.env.Txn)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_progress_create_index: %w", err)
	}
	var out [][]types.Datum
	for _, r := range recs {
		if r.Type != "CREATE INDEX" || r.Status != jobs.StatusRunning {
			continue
		}
		var p indexBuildProgress
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			continue
		}
		if uint32(s.db.ID) != p.Database {
			continue
		}
		command := "CREATE INDEX"
		if p.Concurrent {
			command = "CREATE INDEX CONCURRENTLY"
		}
		var indexRel any
		if p.IndexID != 0 {
			indexRel = types.DOid(indexOID(catalog.ID(p.TableID), catalog.IndexID(p.IndexID)))
		}
		out = append(out, t.row("pid", p.PID, "datid", s.db.ID, "datname", s.db.Name,
			"relid", types.DOid(p.TableID), "index_relid", indexRel, "command", command, "phase", p.Phase,
			"tuples_total", p.TuplesTotal, "tuples_done", p.TuplesDone))
	}
	return out, nil
}
