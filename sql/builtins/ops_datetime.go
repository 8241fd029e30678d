package builtins

import (
	"math"
	"time"

	"github.com/cairn-db/cairn/sql/types"
)

// Date/time arithmetic with Postgres's semantics: months are added on the
// calendar (clamping to the month's last day), then days, then the time
// part; for timestamptz the calendar steps happen on the session zone's
// wall clock, so adding '1 day' across a DST change keeps the local time
// while adding '24 hours' does not.

const (
	microsPerSec = 1_000_000
	microsPerDay = 86_400 * microsPerSec
	daysPerMonth = 30
)

func isInfTS(us int64) bool { return us == math.MinInt64 || us == math.MaxInt64 }

func intervalNeg(a types.DInterval) types.DInterval {
	return types.DInterval{Months: -a.Months, Days: -a.Days, Micros: -a.Micros}
}

func intervalAdd(a, b types.DInterval) (types.DInterval, error) {
	m := int64(a.Months) + int64(b.Months)
	d := int64(a.Days) + int64(b.Days)
	us, of, _ := intArith('+', a.Micros, b.Micros)
	if of || m != int64(int32(m)) || d != int64(int32(d)) {
		return types.DInterval{}, errIntervalRange
	}
	return types.DInterval{Months: int32(m), Days: int32(d), Micros: us}, nil
}

// intervalMul is Postgres's interval_mul: fractional months cascade into
// 30-day days and fractional days into 24-hour time.
func intervalMul(a types.DInterval, f float64) (types.Datum, error) {
	if math.IsNaN(f) {
		return nil, errIntervalRange
	}
	months := float64(a.Months) * f
	days := float64(a.Days) * f
	if math.Abs(months) > math.MaxInt32 || math.Abs(days) > math.MaxInt32 {
		return nil, errIntervalRange
	}
	rm, rd := int32(months), int32(days)
	monthRemDays := tsRound((months - float64(rm)) * daysPerMonth)
	secRem := tsRound((days - float64(rd) + monthRemDays - math.Trunc(monthRemDays)) * 86400)
	if math.Abs(secRem) >= 86400 {
		rd += int32(secRem / 86400)
		secRem -= math.Trunc(secRem/86400) * 86400
	}
	rd += int32(monthRemDays)
	us := math.RoundToEven(float64(a.Micros)*f + secRem*microsPerSec)
	if math.IsNaN(us) || math.Abs(us) >= math.MaxInt64 {
		return nil, errIntervalRange
	}
	return types.DInterval{Months: rm, Days: rd, Micros: int64(us)}, nil
}

// tsRound rounds to microsecond precision, as Postgres's TSROUND.
func tsRound(x float64) float64 { return math.RoundToEven(x*1e6) / 1e6 }

func intervalDiv(a types.DInterval, f float64) (types.Datum, error) {
	if f == 0 {
		return nil, errDivByZero
	}
	return intervalMul(a, 1/f)
}

// addMonths moves a wall-clock time by n calendar months, clamping the day
// to the target month's length (Jan 31 + 1 mon = Feb 28/29).
func addMonths(t time.Time, n int32) time.Time {
	if n == 0 {
		return t
	}
	y, m, d := t.Date()
	total := int(y)*12 + int(m-1) + int(n)
	ny, nm := total/12, time.Month(total%12+1)
	if total < 0 && total%12 != 0 {
		ny, nm = (total-11)/12, time.Month((total%12+12)%12+1)
	}
	last := time.Date(ny, nm+1, 0, 0, 0, 0, 0, time.UTC).Day()
	return time.Date(ny, nm, min(d, last), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
}

func timestampAddInterval(ts types.DTimestamp, iv types.DInterval) (types.Datum, error) {
	if isInfTS(int64(ts)) {
		return ts, nil
	}
	t := ts.Time()
	t = addMonths(t, iv.Months)
	t = t.AddDate(0, 0, int(iv.Days))
	r := types.TimestampFromTime(t)
	us, of, _ := intArith('+', int64(r), iv.Micros)
	if of {
		return nil, errTimestampRange
	}
	return checkTimestamp(types.DTimestamp(us))
}

func timestampTZAddInterval(ctx EvalContext, ts types.DTimestampTZ, iv types.DInterval) (types.Datum, error) {
	if isInfTS(int64(ts)) {
		return ts, nil
	}
	t := ts.Time()
	if iv.Months != 0 || iv.Days != 0 {
		// Calendar steps on the local wall clock, converted back to an
		// instant as Postgres does around DST changes.
		loc := location(ctx)
		l := addMonths(t.In(loc), iv.Months)
		y, m, d := l.Date()
		wall := time.Date(y, m, d+int(iv.Days), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
		t = wallToInstant(wall, loc)
	}
	r := types.TimestampTZFromTime(t)
	us, of, _ := intArith('+', int64(r), iv.Micros)
	if of {
		return nil, errTimestampRange
	}
	return checkTimestamp(types.DTimestampTZ(us))
}

// Timestamp range as sql/types accepts it (see types.DTimestamp).
const (
	minTimestampUs = int64(-2440588) * microsPerDay
	maxTimestampUs = int64(9223371244800000000)
)

func checkTimestamp(d types.Datum) (types.Datum, error) {
	var us int64
	switch v := d.(type) {
	case types.DTimestamp:
		us = int64(v)
	case types.DTimestampTZ:
		us = int64(v)
	}
	if us < minTimestampUs || us >= maxTimestampUs {
		return nil, errTimestampRange
	}
	return d, nil
}

// timestampDiff is timestamp - timestamp: the difference in micros, with
// whole 24-hour periods moved into days (interval_justify_hours).
func timestampDiff(a, b int64) (types.Datum, error) {
	if isInfTS(a) || isInfTS(b) {
		return nil, errIntervalRange
	}
	us, of, _ := intArith('-', a, b)
	if of {
		return nil, errIntervalRange
	}
	return types.DInterval{Days: int32(us / microsPerDay), Micros: us % microsPerDay}, nil
}

func dateToTimestamp(d types.DDate) types.DTimestamp {
	switch d {
	case types.DateNegInfinity:
		return types.TimestampNegInfinity
	case types.DatePosInfinity:
		return types.TimestampPosInfinity
	}
	return types.DTimestamp(int64(d) * microsPerDay)
}

func dateAddDays(d types.DDate, n int64) (types.Datum, error) {
	if d == types.DateNegInfinity || d == types.DatePosInfinity {
		return d, nil
	}
	r := int64(d) + n
	if r < -2440588 || r >= 2147483494-2440588 {
		return nil, errDateRange
	}
	return types.DDate(r), nil
}

func init() {
	ts, tstz, date, iv, tm := types.Timestamp, types.TimestampTZ, types.Date, types.Interval, types.Time
	bin := func(op string, l, r, ret *types.T, fn Fn) {
		registerBinary(op, Overload{Args: []*types.T{l, r}, Return: Fixed(ret), Fn: fn, Strict: true})
	}
	bin("+", date, types.Int4, date, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return dateAddDays(a[0].(types.DDate), int64(a[1].(types.DInt)))
	})
	bin("+", types.Int4, date, date, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return dateAddDays(a[1].(types.DDate), int64(a[0].(types.DInt)))
	})
	bin("-", date, types.Int4, date, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return dateAddDays(a[0].(types.DDate), -int64(a[1].(types.DInt)))
	})
	bin("-", date, date, types.Int4, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		x, y := a[0].(types.DDate), a[1].(types.DDate)
		for _, d := range []types.DDate{x, y} {
			if d == types.DateNegInfinity || d == types.DatePosInfinity {
				return nil, errDateRange
			}
		}
		return types.DInt(int64(x) - int64(y)), nil
	})
	bin("+", date, iv, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampAddInterval(dateToTimestamp(a[0].(types.DDate)), a[1].(types.DInterval))
	})
	bin("-", date, iv, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampAddInterval(dateToTimestamp(a[0].(types.DDate)), intervalNeg(a[1].(types.DInterval)))
	})
	bin("+", date, tm, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return checkTimestamp(dateToTimestamp(a[0].(types.DDate)) + types.DTimestamp(a[1].(types.DTime)))
	})
	// The commuted forms Postgres registers too; without them the operands
	// would resolve to interval + timestamptz and change the result type.
	bin("+", iv, date, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampAddInterval(dateToTimestamp(a[1].(types.DDate)), a[0].(types.DInterval))
	})
	bin("+", tm, date, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return checkTimestamp(dateToTimestamp(a[1].(types.DDate)) + types.DTimestamp(a[0].(types.DTime)))
	})
	bin("+", ts, iv, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampAddInterval(a[0].(types.DTimestamp), a[1].(types.DInterval))
	})
	bin("+", iv, ts, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampAddInterval(a[1].(types.DTimestamp), a[0].(types.DInterval))
	})
	bin("-", ts, iv, ts, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampAddInterval(a[0].(types.DTimestamp), intervalNeg(a[1].(types.DInterval)))
	})
	bin("+", tstz, iv, tstz, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampTZAddInterval(ctx, a[0].(types.DTimestampTZ), a[1].(types.DInterval))
	})
	bin("+", iv, tstz, tstz, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampTZAddInterval(ctx, a[1].(types.DTimestampTZ), a[0].(types.DInterval))
	})
	bin("-", tstz, iv, tstz, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampTZAddInterval(ctx, a[0].(types.DTimestampTZ), intervalNeg(a[1].(types.DInterval)))
	})
	bin("-", ts, ts, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampDiff(int64(a[0].(types.DTimestamp)), int64(a[1].(types.DTimestamp)))
	})
	bin("-", tstz, tstz, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timestampDiff(int64(a[0].(types.DTimestampTZ)), int64(a[1].(types.DTimestampTZ)))
	})
	timeAdd := func(t types.DTime, us int64) types.Datum {
		r := (int64(t) + us%microsPerDay + microsPerDay) % microsPerDay
		return types.DTime(r)
	}
	bin("+", tm, iv, tm, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timeAdd(a[0].(types.DTime), a[1].(types.DInterval).Micros), nil
	})
	bin("+", iv, tm, tm, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timeAdd(a[1].(types.DTime), a[0].(types.DInterval).Micros), nil
	})
	bin("-", tm, iv, tm, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return timeAdd(a[0].(types.DTime), -a[1].(types.DInterval).Micros), nil
	})
	bin("-", tm, tm, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DInterval{Micros: int64(a[0].(types.DTime)) - int64(a[1].(types.DTime))}, nil
	})
	bin("+", iv, iv, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return intervalAdd(a[0].(types.DInterval), a[1].(types.DInterval))
	})
	bin("-", iv, iv, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return intervalAdd(a[0].(types.DInterval), intervalNeg(a[1].(types.DInterval)))
	})
	bin("*", iv, types.Float8, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return intervalMul(a[0].(types.DInterval), float64(a[1].(types.DFloat)))
	})
	bin("*", types.Float8, iv, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return intervalMul(a[1].(types.DInterval), float64(a[0].(types.DFloat)))
	})
	bin("/", iv, types.Float8, iv, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return intervalDiv(a[0].(types.DInterval), float64(a[1].(types.DFloat)))
	})
	registerUnary("-", Overload{Args: []*types.T{iv}, Return: Fixed(iv), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return intervalNeg(a[0].(types.DInterval)), nil
	}})
}
