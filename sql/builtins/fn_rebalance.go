package builtins

import (
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// get_rebalance_table_shards_plan, Citus's preview of what
// rebalance_table_shards would move (docs/distributed.md, "Rebalancing
// shards"). The catalog answers it through the session's resolver when
// that implements RebalanceInfo (sql/pgcatalog's does, over the node's
// tablet directory); rebalance_table_shards itself runs in sql/session,
// which carries the same plan out.

// RebalanceRequest is what a plan is asked for.
type RebalanceRequest struct {
	// Relation limits the plan to that table's colocation group; 0: every
	// distributed table of the database.
	Relation uint32
	// Threshold and MaxMoves are Citus's threshold and max_shard_moves
	// (0: the defaults).
	Threshold float64
	MaxMoves  int
	// Excluded are shard IDs that must not move.
	Excluded []int64
	// ByShardCount balances lease counts instead of bytes (Citus's
	// by_shard_count strategy; by_disk_size is the default).
	ByShardCount bool
}

// RebalanceMove is one move of a plan: the lease (or, with Replica, a
// replica) of a tablet of Table's colocation group, which holds (part of)
// shard ShardID, from node Source to node Target. Key is the tablet's
// start key, where the move is sent.
type RebalanceMove struct {
	Table          uint32
	ShardID        int64
	ShardSize      int64
	Source, Target int32
	Tablet         uint64
	Key            []byte
	// Replica: the move copies the shard's replica from Source to
	// Target, which holds none, and removes Source's (bytes stored);
	// otherwise it hands the lease over (bytes served).
	Replica bool `json:",omitempty"`
}

// RebalanceInfo is implemented by a CatalogInfo that can plan shard
// moves.
type RebalanceInfo interface {
	RebalancePlan(req RebalanceRequest) ([]RebalanceMove, error)
}

// RebalanceOptions turns the rebalancer functions' common arguments into
// a request: relation (0 for NULL), threshold (NULL: the strategy's
// default), max_shard_moves, excluded_shard_list, drain_only and
// rebalance_strategy. Errors carry Citus's SQLSTATEs where it has one.
func RebalanceOptions(relation uint32, threshold types.Datum, maxMoves types.Datum, excluded types.Datum, drainOnly types.Datum, strategy types.Datum) (RebalanceRequest, error) {
	req := RebalanceRequest{Relation: relation}
	if threshold != types.DNull {
		req.Threshold = float64(threshold.(types.DFloat))
		if req.Threshold <= 0 || req.Threshold > 1 {
			return req, pgerror.New(pgerrcode.InvalidParameterValue, "threshold must be between 0 and 1, not %g", req.Threshold)
		}
	}
	if maxMoves != types.DNull {
		n := i64(maxMoves)
		if n < 0 {
			return req, pgerror.New(pgerrcode.InvalidParameterValue, "max_shard_moves must not be negative")
		}
		if n == 0 {
			n = -1 // no move at all
		}
		req.MaxMoves = int(min(n, 1<<30))
	}
	if a, ok := excluded.(*types.DArray); ok {
		for _, e := range a.Elems {
			if e != types.DNull {
				req.Excluded = append(req.Excluded, i64(e))
			}
		}
	}
	if drainOnly != types.DNull && bool(drainOnly.(types.DBool)) {
		return req, pgerror.New(pgerrcode.FeatureNotSupported, "drain_only is not supported: Cairn nodes have no shouldhaveshards flag").
			WithHint("Drain a node with cairn node decommission.")
	}
	if strategy != types.DNull {
		switch s := string(strategy.(types.DString)); s {
		case "by_disk_size":
		case "by_shard_count":
			req.ByShardCount = true
		default:
			return req, pgerror.New(pgerrcode.InvalidParameterValue, "could not find rebalance strategy with name %s", s)
		}
	}
	return req, nil
}

func init() {
	i8a := types.MustArray(types.Int8)
	full := []*types.T{types.RegClass, types.Float4, types.Int4, i8a, types.Bool, types.Name, types.Float4}
	names := []string{"relation", "threshold", "max_shard_moves", "excluded_shard_list", "drain_only", "rebalance_strategy", "improvement_threshold"}
	defaults := []types.Datum{types.DNull, types.DNull, types.DInt(1000000), types.NewArray(types.Int8), types.DBool(false), types.DNull, types.DNull}
	cols := []Column{
		{"table_name", types.RegClass}, {"shardid", types.Int8}, {"shard_size", types.Int8},
		{"sourcename", types.Text}, {"sourceport", types.Int4}, {"targetname", types.Text}, {"targetport", types.Int4},
	}
	// One overload per number of positional arguments, the full one also
	// for named calls (get_rebalance_table_shards_plan(threshold => 0.2)),
	// as make_interval does.
	for n := 0; n <= len(full); n++ {
		o := Overload{Args: full[:n], Class: Generator, Return: Fixed(types.RegClass), Volatility: Volatile,
			Columns: func([]*types.T) []Column { return cols },
			SRF: func(ctx EvalContext, a []types.Datum) (RowIter, error) {
				arg := func(i int) types.Datum {
					if i < len(a) {
						return a[i]
					}
					return defaults[i]
				}
				rel := uint32(0)
				if d := arg(0); d != types.DNull {
					rel = oidArg(d)
				}
				if arg(6) != types.DNull {
					return nil, pgerror.New(pgerrcode.FeatureNotSupported, "improvement_threshold is not supported")
				}
				req, err := RebalanceOptions(rel, arg(1), arg(2), arg(3), arg(4), arg(5))
				if err != nil {
					return nil, err
				}
				ri, _ := catalogInfo(ctx).(RebalanceInfo)
				if ri == nil {
					return &sliceIter{}, nil
				}
				moves, err := ri.RebalancePlan(req)
				if err != nil {
					return nil, err
				}
				rows := make([][]types.Datum, len(moves))
				for i, m := range moves {
					rows[i] = []types.Datum{types.DOid(m.Table), types.DInt(m.ShardID), types.DInt(m.ShardSize),
						types.DString(NodeName(m.Source)), types.DInt(0), types.DString(NodeName(m.Target)), types.DInt(0)}
				}
				return &sliceIter{rows: rows}, nil
			}}
		if n == len(full) {
			o.ArgNames, o.Defaults = names, defaults
		}
		registerFn("get_rebalance_table_shards_plan", o)
	}
}

// NodeName is how the Citus views name a node (citus_shards' nodename):
// leases move between nodes and the catalog knows no node addresses, so
// the name is the node ID and the port 0.
func NodeName(id int32) string { return fmt.Sprintf("n%d", id) }

// RebalanceJob is one rebalance as citus_rebalance_status shows it.
type RebalanceJob struct {
	ID int64
	// State is Citus's citus_job_status: running, finished, cancelled or
	// failed.
	State       string
	Description string
	// Started and Finished (zero: not yet).
	Started, Finished time.Time
	// Moves is how many moves the plan had, Done how many were made.
	Moves, Done int
}

// RebalanceStatusInfo is implemented by a CatalogInfo that can read the
// rebalance jobs.
type RebalanceStatusInfo interface {
	RebalanceJobs() ([]RebalanceJob, error)
}

func init() {
	cols := []Column{
		{"job_id", types.Int8}, {"state", types.Text}, {"job_type", types.Name}, {"description", types.Text},
		{"started_at", types.TimestampTZ}, {"finished_at", types.TimestampTZ}, {"details", types.JSONB},
	}
	ts := func(t time.Time) types.Datum {
		if t.IsZero() {
			return types.DNull
		}
		return types.TimestampTZFromTime(t)
	}
	for n := 0; n <= 1; n++ {
		o := Overload{Args: []*types.T{types.Bool}[:n], Class: Generator, Return: Fixed(types.Int8), Volatility: Volatile,
			Columns: func([]*types.T) []Column { return cols },
			SRF: func(ctx EvalContext, _ []types.Datum) (RowIter, error) {
				ri, _ := catalogInfo(ctx).(RebalanceStatusInfo)
				if ri == nil {
					return &sliceIter{}, nil
				}
				recs, err := ri.RebalanceJobs()
				if err != nil {
					return nil, err
				}
				var rows [][]types.Datum
				for _, r := range recs {
					details, err := types.ParseJSON(fmt.Sprintf(`{"task_state_counts": {"done": %d, "runnable": %d}}`, r.Done, r.Moves-r.Done))
					if err != nil {
						return nil, err
					}
					rows = append(rows, []types.Datum{types.DInt(r.ID), types.DString(r.State), types.DString("rebalance"),
						types.DString(r.Description), ts(r.Started), ts(r.Finished), types.NewJSON(details)})
				}
				return &sliceIter{rows: rows}, nil
			}}
		if n == 1 {
			o.ArgNames, o.Defaults = []string{"raw"}, []types.Datum{types.DBool(false)}
		}
		registerFn("citus_rebalance_status", o)
	}
}
