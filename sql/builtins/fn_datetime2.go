package builtins

import (
	"math"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Constructors (make_*), age and time zone conversion.

// loadZone resolves a time zone name as the timezone() function and AT
// TIME ZONE take it: IANA names and abbreviations Go knows (UTC, GMT).
// POSIX-style offsets ("UTC+3", whose sign Postgres inverts) are not
// accepted.
func loadZone(name string) (*time.Location, error) {
	switch strings.ToUpper(name) {
	case "UTC", "GMT", "Z", "ZULU":
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" || name == "Local" {
		return nil, errInvalidParam("time zone \"%s\" not recognized", name)
	}
	return loc, nil
}

// age is Postgres's timestamp_age: field-by-field differences of two wall
// clocks, borrowing from the next larger field, with month lengths taken
// from the earlier operand's month.
func age(t1, t2 time.Time) types.DInterval {
	neg := t1.Before(t2)
	y1, m1, d1 := t1.Date()
	y2, m2, d2 := t2.Date()
	usec := int64(t1.Nanosecond()/1000 - t2.Nanosecond()/1000)
	sec := int64(t1.Second() - t2.Second())
	mi := int64(t1.Minute() - t2.Minute())
	hour := int64(t1.Hour() - t2.Hour())
	mday := int64(d1 - d2)
	mon := int64(m1 - m2)
	year := int64(y1 - y2)
	if neg {
		usec, sec, mi, hour, mday, mon, year = -usec, -sec, -mi, -hour, -mday, -mon, -year
	}
	for usec < 0 {
		usec += 1e6
		sec--
	}
	for sec < 0 {
		sec += 60
		mi--
	}
	for mi < 0 {
		mi += 60
		hour--
	}
	for hour < 0 {
		hour += 24
		mday--
	}
	for mday < 0 {
		if neg {
			mday += int64(daysInMonth(y1, m1))
		} else {
			mday += int64(daysInMonth(y2, m2))
		}
		mon--
	}
	for mon < 0 {
		mon += 12
		year--
	}
	if neg {
		usec, sec, mi, hour, mday, mon, year = -usec, -sec, -mi, -hour, -mday, -mon, -year
	}
	return types.DInterval{Months: int32(year*12 + mon), Days: int32(mday),
		Micros: ((hour*60+mi)*60+sec)*1e6 + usec}
}

func daysInMonth(y int, m time.Month) int { return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() }

func errTimeField(h, m int64, s float64) error {
	return pgerror.New(pgerrcode.DatetimeFieldOverflow, "time field value out of range: %d:%02d:%02g", h, m, s)
}

// makeTime validates h:m:s as make_time does (24:00:00 allowed).
func makeTime(h, m int64, s float64) (int64, error) {
	if h < 0 || h > 24 || m < 0 || m > 59 || s < 0 || s > 60 || math.IsNaN(s) ||
		h == 24 && (m > 0 || s > 0) {
		return 0, errTimeField(h, m, s)
	}
	us := int64(math.Round(s * 1e6))
	return (h*60+m)*60e6 + us, nil
}

func makeTimestamp(a []types.Datum) (types.DTimestamp, error) {
	date, err := functions["make_date"][0].Fn(nil, a[:3])
	if err != nil {
		return 0, err
	}
	t, err := makeTime(i64(a[3]), i64(a[4]), float64(a[5].(types.DFloat)))
	if err != nil {
		return 0, err
	}
	return types.DTimestamp(int64(date.(types.DDate))*microsPerDay + t), nil
}

func init() {
	ts, tstz, i4, f8, text, iv := types.Timestamp, types.TimestampTZ, types.Int4, types.Float8, types.Text, types.Interval
	registerFn("age",
		Overload{Args: []*types.T{ts, ts}, Return: Fixed(iv), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			x, y := a[0].(types.DTimestamp), a[1].(types.DTimestamp)
			if isInfTS(int64(x)) || isInfTS(int64(y)) {
				return nil, errIntervalRange
			}
			return age(x.Time(), y.Time()), nil
		}},
		Overload{Args: []*types.T{tstz, tstz}, Return: Fixed(iv), Strict: true, Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			x, y := a[0].(types.DTimestampTZ), a[1].(types.DTimestampTZ)
			if isInfTS(int64(x)) || isInfTS(int64(y)) {
				return nil, errIntervalRange
			}
			loc := location(ctx)
			return age(x.Time().In(loc), y.Time().In(loc)), nil
		}},
		// age(x) is age(current_date, x): midnight of today in the session zone.
		Overload{Args: []*types.T{ts}, Return: Fixed(iv), Strict: true, Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			x := a[0].(types.DTimestamp)
			if isInfTS(int64(x)) {
				return nil, errIntervalRange
			}
			now := ctx.TxnTimestamp().In(location(ctx))
			y, m, d := now.Date()
			return age(time.Date(y, m, d, 0, 0, 0, 0, time.UTC), x.Time()), nil
		}},
	)
	registerFn("make_time", Overload{Args: []*types.T{i4, i4, f8}, ArgNames: []string{"hour", "min", "sec"},
		Return: Fixed(types.Time), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			us, err := makeTime(i64(a[0]), i64(a[1]), float64(a[2].(types.DFloat)))
			return types.DTime(us), err
		}})
	tsNames := []string{"year", "month", "mday", "hour", "min", "sec", "timezone"}
	registerFn("make_timestamp", Overload{Args: []*types.T{i4, i4, i4, i4, i4, f8}, ArgNames: tsNames[:6], Return: Fixed(ts), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			v, err := makeTimestamp(a)
			if err != nil {
				return nil, err
			}
			return checkTimestamp(v)
		}})
	mkTZ := func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		v, err := makeTimestamp(a)
		if err != nil {
			return nil, err
		}
		loc := location(ctx)
		if len(a) > 6 {
			if loc, err = loadZone(str(a[6])); err != nil {
				return nil, err
			}
		}
		return checkTimestamp(types.TimestampTZFromTime(wallIn(v, loc)))
	}
	registerFn("make_timestamptz",
		Overload{Args: []*types.T{i4, i4, i4, i4, i4, f8}, ArgNames: tsNames[:6], Return: Fixed(tstz), Strict: true, Volatility: Stable, Fn: mkTZ},
		Overload{Args: []*types.T{i4, i4, i4, i4, i4, f8, text}, ArgNames: tsNames, Return: Fixed(tstz), Strict: true, Volatility: Stable, Fn: mkTZ},
	)
	// make_interval(years, months, weeks, days, hours, mins, secs), each
	// defaulting to 0: one overload per arity stands in for defaults in
	// positional calls; the full one carries the names and defaults for
	// named calls (make_interval(days => 3)), and only it, so that a named
	// call has one candidate as in Postgres.
	full := []*types.T{i4, i4, i4, i4, i4, i4, f8}
	for n := 0; n <= len(full); n++ {
		var names []string
		var defaults []types.Datum
		if n == len(full) {
			names = []string{"years", "months", "weeks", "days", "hours", "mins", "secs"}
			defaults = []types.Datum{types.DInt(0), types.DInt(0), types.DInt(0), types.DInt(0), types.DInt(0), types.DInt(0), types.DFloat(0)}
		}
		registerFn("make_interval", Overload{Args: full[:n], ArgNames: names, Defaults: defaults, Return: Fixed(iv), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				var f [7]float64
				for i, d := range a {
					if i == 6 {
						f[i] = float64(d.(types.DFloat))
					} else {
						f[i] = float64(i64(d))
					}
				}
				months := f[0]*12 + f[1]
				days := f[2]*7 + f[3]
				us := math.Round((f[4]*3600+f[5]*60)*1e6 + f[6]*1e6)
				if math.Abs(months) > math.MaxInt32 || math.Abs(days) > math.MaxInt32 || math.Abs(us) >= math.MaxInt64 || math.IsNaN(us) {
					return nil, errIntervalRange
				}
				return types.DInterval{Months: int32(months), Days: int32(days), Micros: int64(us)}, nil
			}})
	}
	// timezone(zone, x) is x AT TIME ZONE zone.
	registerFn("timezone",
		Overload{Args: []*types.T{text, tstz}, Return: Fixed(ts), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			x := a[1].(types.DTimestampTZ)
			if isInfTS(int64(x)) {
				return types.DTimestamp(x), nil
			}
			loc, err := loadZone(str(a[0]))
			if err != nil {
				return nil, err
			}
			return types.TimestampFromTime(x.Time().In(loc)), nil
		}},
		Overload{Args: []*types.T{text, ts}, Return: Fixed(tstz), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			x := a[1].(types.DTimestamp)
			if isInfTS(int64(x)) {
				return types.DTimestampTZ(x), nil
			}
			loc, err := loadZone(str(a[0]))
			if err != nil {
				return nil, err
			}
			return checkTimestamp(types.TimestampTZFromTime(wallIn(x, loc)))
		}},
	)
}

// wallIn interprets a wall-clock timestamp in loc; see wallToInstant.
func wallIn(ts types.DTimestamp, loc *time.Location) time.Time {
	return wallToInstant(ts.Time(), loc)
}

// wallToInstant returns the instant at which loc's clocks read wall's
// fields. Around a transition it picks as Postgres does: a wall time that
// never happens (clocks set forward) is read with the offset in force
// before the transition, so 02:30 on a spring-forward night in New York is
// 02:30 EST = 03:30 EDT; one that happens twice (clocks set back) with the
// offset after it, so 01:30 on the fall-back night is 01:30 EST. Go's
// time.Date leaves that choice unspecified.
func wallToInstant(wall time.Time, loc *time.Location) time.Time {
	w := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), time.UTC)
	offsetAt := func(t time.Time) int {
		_, off := t.In(loc).Zone()
		return off
	}
	// Transitions are far more than a day apart, so the offsets a day
	// either side are those before and after any transition near w.
	before, after := offsetAt(w.Add(-24*time.Hour)), offsetAt(w.Add(24*time.Hour))
	tb := w.Add(-time.Duration(before) * time.Second)
	if before == after {
		return tb.In(loc)
	}
	ta := w.Add(-time.Duration(after) * time.Second)
	if offsetAt(ta) == after {
		return ta.In(loc) // a valid or twice-happening wall time: "after"
	}
	return tb.In(loc) // a wall time that never happens: "before"
}
