package builtins

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// pg_sleep and friends, and pg_size_pretty. Cairn has no void type: the
// sleep functions return an unknown-typed empty string, which prints as
// psql prints a void result.

// sleepFor waits d, or until the statement is cancelled (57014).
func sleepFor(ctx EvalContext, d time.Duration) (types.Datum, error) {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Ctx().Done():
			return nil, pgerror.New(pgerrcode.QueryCanceled, "canceling statement due to user request")
		}
	}
	return types.DString(""), nil
}

// SizePretty is Postgres 15's pg_size_pretty(bigint): bytes below 10 kB,
// then the largest unit (to PB) keeping the value under 20480, halves
// rounded away from zero. citus_tables.table_size (sql/pgcatalog) prints
// sizes with it too, as Citus does.
func SizePretty(size int64) string {
	units := []struct {
		name  string
		limit int64
		round bool
		bits  int
	}{{"bytes", 10 * 1024, false, 0}, {"kB", 20*1024 - 1, true, 10}, {"MB", 20*1024 - 1, true, 20},
		{"GB", 20*1024 - 1, true, 30}, {"TB", 20*1024 - 1, true, 40}, {"PB", 20*1024 - 1, true, 50}}
	abs := func(v int64) int64 {
		if v < 0 {
			return -v
		}
		return v
	}
	for i, u := range units {
		if i == len(units)-1 || abs(size) < u.limit {
			if u.round {
				if size < 0 {
					size = (size - 1) / 2
				} else {
					size = (size + 1) / 2
				}
			}
			return strconv.FormatInt(size, 10) + " " + u.name
		}
		next := units[i+1]
		bits := next.bits - u.bits
		if next.round {
			bits--
		}
		if u.round {
			bits++
		}
		size /= int64(1) << bits
	}
	return ""
}

// sizePrettyDec is pg_size_pretty(numeric): the same units, computed
// with truncating numeric division, so sums of sizes print too.
func sizePrettyDec(size *apd.Decimal) (string, error) {
	c := apd.BaseContext.WithPrecision(1000)
	limits := []int64{10 * 1024, 20*1024 - 1, 20*1024 - 1, 20*1024 - 1, 20*1024 - 1, 20*1024 - 1}
	names := []string{"bytes", "kB", "MB", "GB", "TB", "PB"}
	bits := []int64{0, 10, 20, 30, 40, 50}
	d := new(apd.Decimal).Set(size)
	for i := range names {
		var abs apd.Decimal
		abs.Abs(d)
		if i == len(names)-1 || abs.Cmp(apd.New(limits[i], 0)) < 0 {
			if i > 0 { // half rounded: (d +/- 1) / 2, truncated
				one := apd.New(1, 0)
				if d.Negative {
					one.Negative = true
				}
				if _, err := c.Add(d, d, one); err != nil {
					return "", errInternal("pg_size_pretty: %w", err)
				}
				if _, err := c.QuoInteger(d, d, apd.New(2, 0)); err != nil {
					return "", errInternal("pg_size_pretty: %w", err)
				}
			}
			return d.Text('f') + " " + names[i], nil
		}
		shift := bits[i+1] - bits[i] - 1
		if i > 0 {
			shift++
		}
		if _, err := c.QuoInteger(d, d, apd.New(int64(1)<<shift, 0)); err != nil {
			return "", errInternal("pg_size_pretty: %w", err)
		}
	}
	return "", nil
}

func init() {
	f8 := types.Float8
	registerFn("pg_size_pretty", Overload{Args: []*types.T{types.Numeric}, Return: Fixed(types.Text), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			d := toDecimal(a[0])
			if d.Form != apd.Finite {
				return types.DString(d.String() + " bytes"), nil
			}
			s, err := sizePrettyDec(d)
			return types.DString(s), err
		}})
	registerFn("pg_sleep", Overload{Args: []*types.T{f8}, Return: Fixed(types.Unknown), Strict: true, Volatility: Volatile,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			s := float64(a[0].(types.DFloat))
			if math.IsNaN(s) || s <= 0 {
				return types.DString(""), nil
			}
			return sleepFor(ctx, time.Duration(math.Min(s, 1e9)*float64(time.Second)))
		}})
	registerFn("pg_sleep_for", Overload{Args: []*types.T{types.Interval}, Return: Fixed(types.Unknown), Strict: true, Volatility: Volatile,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			iv := a[0].(types.DInterval)
			us := float64(iv.Months)*30*86400e6 + float64(iv.Days)*86400e6 + float64(iv.Micros)
			return sleepFor(ctx, time.Duration(math.Min(us, 1e15)*1e3))
		}})
	registerFn("pg_sleep_until", Overload{Args: []*types.T{types.TimestampTZ}, Return: Fixed(types.Unknown), Strict: true, Volatility: Volatile,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			ts := a[0].(types.DTimestampTZ)
			if isInfTS(int64(ts)) {
				return nil, errInvalidParam("timestamp out of range")
			}
			return sleepFor(ctx, time.Until(ts.Time()))
		}})
	registerFn("pg_size_pretty", Overload{Args: []*types.T{types.Int8}, Return: Fixed(types.Text), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DString(SizePretty(i64(a[0]))), nil
		}})
}

// NotifyContext is implemented by the EvalContext of a session that can
// send and hear notifications: pg_notify queues a NOTIFY for the
// transaction's commit, pg_listening_channels lists what it listens to.
type NotifyContext interface {
	Notify(channel, payload string) error
	ListeningChannels() []string
}

func init() {
	text := types.Text
	registerFn("pg_notify", Overload{Args: []*types.T{text, text}, Return: Fixed(types.Unknown), Volatility: Volatile,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			nc, ok := ctx.(NotifyContext)
			if !ok {
				return nil, pgerror.New(pgerrcode.FeatureNotSupported, "pg_notify is not available here")
			}
			// PostgreSQL's pg_notify is not strict: a NULL channel is an
			// empty one (an error), a NULL payload an empty payload.
			ch, payload := "", ""
			if !types.IsNull(a[0]) {
				ch = string(a[0].(types.DString))
			}
			if !types.IsNull(a[1]) {
				payload = string(a[1].(types.DString))
			}
			return types.DString(""), nc.Notify(ch, payload)
		}})
	registerFn("pg_listening_channels", Overload{Return: Fixed(text), Class: Generator, Volatility: Stable,
		SRF: func(ctx EvalContext, _ []types.Datum) (RowIter, error) {
			var rows [][]types.Datum
			if nc, ok := ctx.(NotifyContext); ok {
				chs := nc.ListeningChannels()
				sort.Strings(chs)
				for _, c := range chs {
					rows = append(rows, []types.Datum{types.DString(c)})
				}
			}
			return &sliceIter{rows: rows}, nil
		},
		Columns: func([]*types.T) []Column { return []Column{{"pg_listening_channels", text}} }})
}
