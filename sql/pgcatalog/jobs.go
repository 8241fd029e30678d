package pgcatalog

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/types"
)

// oidJobs is cairn_catalog.jobs' pg_class OID.
const oidJobs = 15003

func init() {
	define("cairn_catalog", "jobs", oidJobs, true,
		`job_id:bigint job_type:text description:text user_name:name status:text fraction_completed:float8 created:timestamptz started:timestamptz modified:timestamptz finished:timestamptz error:text`,
		genJobs)
}

// genJobs lists every job (package jobs), oldest first, as the statement's
// transaction reads their records: a running job's fraction_completed
// and modified (its last heartbeat) move as it works. SHOW JOBS and SHOW
// JOB n are rewritten into queries of this view (sql/parser).
func genJobs(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	if s.env.Txn == nil {
		return nil, nil
	}
	recs, err := jobs.List(ctx, s.env.Txn)
	if err != nil {
		return nil, fmt.Errorf("cairn_catalog.jobs: %w", err)
	}
	ts := func(tm time.Time) any {
		if tm.IsZero() {
			return nil
		}
		return types.TimestampTZFromTime(tm)
	}
	out := make([][]types.Datum, 0, len(recs))
	for _, r := range recs {
		var errText any
		if r.Error != "" {
			errText = r.Error
		}
		out = append(out, t.row("job_id", r.ID, "job_type", r.Type, "description", r.Description,
			"user_name", r.User, "status", string(r.Status), "fraction_completed", types.DFloat(r.Fraction),
			"created", ts(r.Created), "started", ts(r.Started), "modified", ts(r.Modified),
			"finished", ts(r.Finished), "error", errText))
	}
	return out, nil
}
