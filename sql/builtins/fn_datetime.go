package builtins

import (
	"math"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Date/time functions. now() and friends read the EvalContext's fixed
// timestamps; clock_timestamp reads the wall clock.

func tsFn(name string, vol Volatility, ret *types.T, f func(ctx EvalContext) types.Datum) {
	registerFn(name, Overload{Return: Fixed(ret), Volatility: vol, Fn: func(ctx EvalContext, _ []types.Datum) (types.Datum, error) {
		return f(ctx), nil
	}})
}

// truncTime truncates a wall-clock time to a date_trunc field.
func truncTime(t time.Time, field string) (time.Time, error) {
	y, m, d := t.Date()
	loc := t.Location()
	switch field {
	case "microseconds":
		return t.Truncate(time.Microsecond), nil
	case "milliseconds":
		return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e6*1e6, loc), nil
	case "second":
		return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), 0, loc), nil
	case "minute":
		return time.Date(y, m, d, t.Hour(), t.Minute(), 0, 0, loc), nil
	case "hour":
		return time.Date(y, m, d, t.Hour(), 0, 0, 0, loc), nil
	case "day":
		return time.Date(y, m, d, 0, 0, 0, 0, loc), nil
	case "week":
		wd := (int(t.Weekday()) + 6) % 7 // ISO weeks start on Monday
		return time.Date(y, m, d-wd, 0, 0, 0, 0, loc), nil
	case "month":
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), nil
	case "quarter":
		return time.Date(y, (m-1)/3*3+1, 1, 0, 0, 0, 0, loc), nil
	case "year":
		return time.Date(y, 1, 1, 0, 0, 0, 0, loc), nil
	case "decade":
		return time.Date(floorDivInt(y, 10)*10, 1, 1, 0, 0, 0, 0, loc), nil
	case "century":
		c := floorDivInt(y-1, 100)*100 + 1
		return time.Date(c, 1, 1, 0, 0, 0, 0, loc), nil
	case "millennium":
		c := floorDivInt(y-1, 1000)*1000 + 1
		return time.Date(c, 1, 1, 0, 0, 0, 0, loc), nil
	}
	return time.Time{}, errInvalidParam("unit \"%s\" not recognized for type timestamp without time zone", field)
}

func floorDivInt(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// extract returns a date_part field of a wall-clock time as a numeric
// (extract) value; us is the microseconds since the epoch of the instant
// (for epoch).
func extractField(t time.Time, field string, epochUs int64) (*apd.Decimal, error) {
	y, m, d := t.Date()
	micro := int64(t.Second())*1e6 + int64(t.Nanosecond()/1000)
	switch field {
	case "microseconds":
		return apd.New(micro, 0), nil
	case "milliseconds":
		return apd.New(micro, -3), nil
	case "second":
		return apd.New(micro, -6), nil
	case "minute":
		return apd.New(int64(t.Minute()), 0), nil
	case "hour":
		return apd.New(int64(t.Hour()), 0), nil
	case "day":
		return apd.New(int64(d), 0), nil
	case "month":
		return apd.New(int64(m), 0), nil
	case "quarter":
		return apd.New(int64((m-1)/3+1), 0), nil
	case "year":
		if y <= 0 {
			y-- // there is no year 0: 1 BC is year -1
		}
		return apd.New(int64(y), 0), nil
	case "decade":
		return apd.New(int64(floorDivInt(y, 10)), 0), nil
	case "century":
		if y > 0 {
			return apd.New(int64((y+99)/100), 0), nil
		}
		return apd.New(int64(-((99 - (y - 1)) / 100)), 0), nil
	case "millennium":
		if y > 0 {
			return apd.New(int64((y+999)/1000), 0), nil
		}
		return apd.New(int64(-((999 - (y - 1)) / 1000)), 0), nil
	case "dow":
		return apd.New(int64(t.Weekday()), 0), nil
	case "isodow":
		wd := int64(t.Weekday())
		if wd == 0 {
			wd = 7
		}
		return apd.New(wd, 0), nil
	case "doy":
		return apd.New(int64(t.YearDay()), 0), nil
	case "week":
		_, w := t.ISOWeek()
		return apd.New(int64(w), 0), nil
	case "isoyear":
		iy, _ := t.ISOWeek()
		return apd.New(int64(iy), 0), nil
	case "julian":
		days := floorDivInt64(epochUs, microsPerDay) + 2440588
		frac := epochUs - floorDivInt64(epochUs, microsPerDay)*microsPerDay
		r := apd.New(days, 0)
		if frac != 0 {
			var f apd.Decimal
			quoRound(&f, apd.New(frac, 0), apd.New(microsPerDay, 0), 20)
			_, _ = exactCtx.Add(r, r, &f)
		}
		return r, nil
	case "epoch":
		return apd.New(epochUs, -6), nil
	}
	return nil, errInvalidParam("unit \"%s\" not recognized for type timestamp", field)
}

func floorDivInt64(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func normField(s string) string {
	f := strings.ToLower(strings.TrimSpace(s))
	if alias, ok := fieldAliases[f]; ok {
		return alias
	}
	return f
}

var fieldAliases = map[string]string{
	"microsecond": "microseconds", "us": "microseconds", "usec": "microseconds", "usecs": "microseconds",
	"millisecond": "milliseconds", "ms": "milliseconds", "msec": "milliseconds", "msecs": "milliseconds",
	"seconds": "second", "sec": "second", "secs": "second", "s": "second",
	"minutes": "minute", "min": "minute", "mins": "minute", "m": "minute",
	"hours": "hour", "hr": "hour", "hrs": "hour", "h": "hour",
	"days": "day", "d": "day", "weeks": "week", "w": "week",
	"months": "month", "mon": "month", "mons": "month",
	"years": "year", "y": "year", "yr": "year", "yrs": "year",
	"decades": "decade", "centuries": "century", "millennia": "millennium", "millenniums": "millennium",
}

// extractTimestamp computes extract(field FROM ts) for timestamp,
// timestamptz (in the session zone) and date; infinities give ±Infinity
// for the unbounded fields and NULL for the others, as in Postgres 15.
func extractTimestamp(ctx EvalContext, field string, d types.Datum) (types.Datum, error) {
	var t time.Time
	var us int64
	switch v := d.(type) {
	case types.DTimestamp:
		us = int64(v)
		if !isInfTS(us) {
			t = v.Time()
		}
	case types.DTimestampTZ:
		us = int64(v)
		if !isInfTS(us) {
			t = v.Time().In(location(ctx))
		}
	case types.DDate:
		ts := dateToTimestamp(v)
		us = int64(ts)
		if !isInfTS(us) {
			t = ts.Time()
		}
	}
	if isInfTS(us) {
		switch field {
		case "epoch", "year", "decade", "century", "millennium", "julian", "isoyear":
			return newDec(&apd.Decimal{Form: apd.Infinite, Negative: us == math.MinInt64}), nil
		}
		return types.DNull, nil
	}
	if field == "timezone" || field == "timezone_hour" || field == "timezone_minute" {
		if _, ok := d.(types.DTimestampTZ); !ok {
			return nil, errInvalidParam("unit \"%s\" not supported for type timestamp without time zone", field)
		}
		_, off := t.Zone()
		switch field {
		case "timezone_hour":
			return decFromInt(int64(off / 3600)), nil
		case "timezone_minute":
			return decFromInt(int64(off % 3600 / 60)), nil
		}
		return decFromInt(int64(off)), nil
	}
	r, err := extractField(t, field, us)
	if err != nil {
		return nil, err
	}
	if _, ok := d.(types.DDate); ok {
		switch field {
		case "hour", "minute", "second", "milliseconds", "microseconds":
			return nil, errInvalidParam("unit \"%s\" not supported for type date", field)
		}
	}
	return newDec(r), nil
}

func extractInterval(field string, iv types.DInterval) (types.Datum, error) {
	switch field {
	case "epoch":
		// Postgres counts a year as 365.25 days and a month as 30 days here.
		secs := apd.New(int64(iv.Months/12)*31557600+int64(iv.Months%12)*2592000+int64(iv.Days)*86400, 0)
		var r apd.Decimal
		_, _ = exactCtx.Add(&r, secs, apd.New(iv.Micros, -6))
		return newDec(&r), nil
	case "year":
		return decFromInt(int64(iv.Months / 12)), nil
	case "month":
		return decFromInt(int64(iv.Months % 12)), nil
	case "day":
		return decFromInt(int64(iv.Days)), nil
	case "hour":
		return decFromInt(iv.Micros / 3600e6), nil
	case "minute":
		return decFromInt(iv.Micros % 3600e6 / 60e6), nil
	case "second":
		return newDec(apd.New(iv.Micros%60e6, -6)), nil
	case "milliseconds":
		return newDec(apd.New(iv.Micros%60e6, -3)), nil
	case "microseconds":
		return decFromInt(iv.Micros % 60e6), nil
	}
	return nil, errInvalidParam("unit \"%s\" not supported for type interval", field)
}

func init() {
	tstz, ts, date, text, f8, iv := types.TimestampTZ, types.Timestamp, types.Date, types.Text, types.Float8, types.Interval
	for _, n := range []string{"now", "current_timestamp", "transaction_timestamp"} {
		tsFn(n, Stable, tstz, func(ctx EvalContext) types.Datum { return types.TimestampTZFromTime(ctx.TxnTimestamp()) })
	}
	tsFn("statement_timestamp", Stable, tstz, func(ctx EvalContext) types.Datum { return types.TimestampTZFromTime(ctx.StmtTimestamp()) })
	tsFn("clock_timestamp", Volatile, tstz, func(EvalContext) types.Datum { return types.TimestampTZFromTime(time.Now()) })
	tsFn("current_date", Stable, date, func(ctx EvalContext) types.Datum {
		t := ctx.TxnTimestamp().In(location(ctx))
		return types.DDate(floorDivInt64(int64(types.TimestampFromTime(t)), microsPerDay))
	})
	tsFn("localtimestamp", Stable, ts, func(ctx EvalContext) types.Datum {
		return types.TimestampFromTime(ctx.TxnTimestamp().In(location(ctx)))
	})

	registerFn("date_trunc",
		Overload{Args: []*types.T{text, ts}, Return: Fixed(ts), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			v := a[1].(types.DTimestamp)
			if isInfTS(int64(v)) {
				return v, nil
			}
			t, err := truncTime(v.Time(), normField(str(a[0])))
			if err != nil {
				return nil, err
			}
			return types.TimestampFromTime(t), nil
		}},
		Overload{Args: []*types.T{text, tstz}, Return: Fixed(tstz), Strict: true, Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			return truncTZ(a[1].(types.DTimestampTZ), str(a[0]), location(ctx))
		}},
		Overload{Args: []*types.T{text, tstz, text}, Return: Fixed(tstz), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			loc, err := time.LoadLocation(str(a[2]))
			if err != nil {
				return nil, errInvalidParam("time zone \"%s\" not recognized", str(a[2]))
			}
			return truncTZ(a[1].(types.DTimestampTZ), str(a[0]), loc)
		}},
	)
	for _, name := range []string{"extract", "date_part"} {
		asFloat := name == "date_part"
		ret := types.Numeric
		if asFloat {
			ret = f8
		}
		wrap := func(d types.Datum, err error) (types.Datum, error) {
			if err != nil || !asFloat || types.IsNull(d) {
				return d, err
			}
			f, _ := d.(*types.DDecimal).Float64()
			if d.(*types.DDecimal).Form == apd.Infinite {
				f = math.Inf(map[bool]int{true: -1, false: 1}[d.(*types.DDecimal).Negative])
			}
			return types.DFloat(f), nil
		}
		for _, t := range []*types.T{ts, tstz, date} {
			vol := Immutable
			if t == tstz {
				vol = Stable
			}
			registerFn(name, Overload{Args: []*types.T{text, t}, Return: Fixed(ret), Strict: true, Volatility: vol,
				Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
					return wrap(extractTimestamp(ctx, normField(str(a[0])), a[1]))
				}})
		}
		registerFn(name, Overload{Args: []*types.T{text, iv}, Return: Fixed(ret), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				return wrap(extractInterval(normField(str(a[0])), a[1].(types.DInterval)))
			}})
	}
	registerFn("make_date", Overload{Args: []*types.T{types.Int4, types.Int4, types.Int4}, ArgNames: []string{"year", "month", "day"}, Return: Fixed(date), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			y, m, d := i64(a[0]), i64(a[1]), i64(a[2])
			if y == 0 || m < 1 || m > 12 || d < 1 || d > 31 {
				return nil, errDatetimeFieldRange(y, m, d)
			}
			if y < 0 {
				y++ // 1 BC is year 0 in the proleptic calendar
			}
			t := time.Date(int(y), time.Month(m), int(d), 0, 0, 0, 0, time.UTC)
			if t.Day() != int(d) {
				return nil, errDatetimeFieldRange(i64(a[0]), m, d)
			}
			return types.DDate(floorDivInt64(t.Unix(), 86400)), nil
		}})
	registerFn("to_timestamp", Overload{Args: []*types.T{f8}, Return: Fixed(tstz), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			f := float64(a[0].(types.DFloat))
			switch {
			case math.IsNaN(f):
				return nil, errInvalidParam("timestamp cannot be NaN")
			case math.IsInf(f, 1):
				return types.DTimestampTZ(types.TimestampPosInfinity), nil
			case math.IsInf(f, -1):
				return types.DTimestampTZ(types.TimestampNegInfinity), nil
			}
			us := math.Round(f * 1e6)
			if us < float64(minTimestampUs) || us >= float64(maxTimestampUs) {
				return nil, errTimestampRange
			}
			return types.DTimestampTZ(int64(us)), nil
		}})
	for _, t := range []*types.T{date, ts, tstz} {
		registerFn("isfinite", Overload{Args: []*types.T{t}, Return: Fixed(types.Bool), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				switch v := a[0].(type) {
				case types.DDate:
					return types.DBool(v != types.DateNegInfinity && v != types.DatePosInfinity), nil
				case types.DTimestamp:
					return types.DBool(!isInfTS(int64(v))), nil
				case types.DTimestampTZ:
					return types.DBool(!isInfTS(int64(v))), nil
				}
				return types.DBool(true), nil
			}})
	}
	registerFn("isfinite", Overload{Args: []*types.T{iv}, Return: Fixed(types.Bool), Strict: true,
		Fn: func(EvalContext, []types.Datum) (types.Datum, error) { return types.DBool(true), nil }})
	justify := func(name string, f func(types.DInterval) types.DInterval) {
		registerFn(name, Overload{Args: []*types.T{iv}, Return: Fixed(iv), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) { return f(a[0].(types.DInterval)), nil }})
	}
	justify("justify_hours", justifyHours)
	justify("justify_days", justifyDays)
	justify("justify_interval", justifyInterval)
}

// justifyInterval is Postgres's interval_justify_interval: days into
// months, then a sign fix-up between months and days+time, then hours into
// days and a sign fix-up between days and time (justifyHours).
func justifyInterval(v types.DInterval) types.DInterval {
	if v.Days > 0 && v.Micros > 0 || v.Days < 0 && v.Micros < 0 {
		v.Days += int32(v.Micros / microsPerDay)
		v.Micros %= microsPerDay
	}
	v.Months += v.Days / daysPerMonth
	v.Days %= daysPerMonth
	if v.Months > 0 && (v.Days < 0 || v.Days == 0 && v.Micros < 0) {
		v.Days += daysPerMonth
		v.Months--
	} else if v.Months < 0 && (v.Days > 0 || v.Days == 0 && v.Micros > 0) {
		v.Days -= daysPerMonth
		v.Months++
	}
	return justifyHours(v)
}

// justifyHours is Postgres's interval_justify_hours: whole days out of the
// time, then a sign fix-up between days and time.
func justifyHours(v types.DInterval) types.DInterval {
	v.Days += int32(v.Micros / microsPerDay)
	v.Micros %= microsPerDay
	if v.Days > 0 && v.Micros < 0 {
		v.Micros += microsPerDay
		v.Days--
	} else if v.Days < 0 && v.Micros > 0 {
		v.Micros -= microsPerDay
		v.Days++
	}
	return v
}

func justifyDays(v types.DInterval) types.DInterval {
	v.Months += v.Days / daysPerMonth
	v.Days %= daysPerMonth
	if v.Months > 0 && v.Days < 0 {
		v.Days += daysPerMonth
		v.Months--
	} else if v.Months < 0 && v.Days > 0 {
		v.Days -= daysPerMonth
		v.Months++
	}
	return v
}

func truncTZ(v types.DTimestampTZ, field string, loc *time.Location) (types.Datum, error) {
	if isInfTS(int64(v)) {
		return v, nil
	}
	t, err := truncTime(v.Time().In(loc), normField(field))
	if err != nil {
		return nil, err
	}
	return types.TimestampTZFromTime(t), nil
}
