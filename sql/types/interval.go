package types

import (
	"math"
	"strconv"
	"strings"
)

// parseInterval reads Postgres-style intervals ("1 year 2 mons -3 days
// 04:05:06.5", "@ 1 hour ago", "10" meaning seconds) and ISO 8601
// durations ("P1Y2M3DT4H5M6.5S"). Fractional units cascade as Postgres's
// do: years into months, months into 30-day days, days into 24-hour time.
func parseInterval(t *T, s string) (Datum, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	var acc intervalAcc
	var ok bool
	if strings.HasPrefix(v, "p") {
		ok = acc.parseISO(v[1:])
	} else {
		ok = acc.parsePostgres(v)
	}
	if !ok {
		return nil, errDatetimeSyntax(t, s)
	}
	iv, ok := acc.result()
	if !ok {
		return nil, errIntervalRange()
	}
	return iv, nil
}

// intervalAcc accumulates fields in wide types so overflow is caught once.
type intervalAcc struct {
	months, days float64
	micros       float64
}

func (a *intervalAcc) add(n float64, unit string) bool {
	const day = float64(microsPerDay)
	switch unit {
	case "microsecond", "microseconds", "us", "usec", "usecs", "useconds":
		a.micros += n
	case "millisecond", "milliseconds", "ms", "msec", "msecs", "mseconds":
		a.micros += n * 1e3
	case "second", "seconds", "s", "sec", "secs":
		a.micros += n * 1e6
	case "minute", "minutes", "m", "min", "mins":
		a.micros += n * 60e6
	case "hour", "hours", "h", "hr", "hrs":
		a.micros += n * 3600e6
	case "day", "days", "d":
		whole := math.Trunc(n)
		a.days += whole
		a.micros += (n - whole) * day
	case "week", "weeks", "w":
		a.add(n*7, "day")
	case "month", "months", "mon", "mons":
		whole := math.Trunc(n)
		a.months += whole
		a.add((n-whole)*30, "day")
	case "year", "years", "y", "yr", "yrs":
		whole := math.Trunc(n)
		a.months += whole*12 + math.Round((n-whole)*12)
	case "decade", "decades":
		a.add(n*10, "year")
	case "century", "centuries":
		a.add(n*100, "year")
	case "millennium", "millennia", "millenniums":
		a.add(n*1000, "year")
	default:
		return false
	}
	return true
}

func (a *intervalAcc) parsePostgres(v string) bool {
	v = strings.TrimSpace(strings.TrimPrefix(v, "@"))
	ago := false
	if rest, ok := strings.CutSuffix(v, " ago"); ok {
		v, ago = rest, true
	}
	f := strings.Fields(v)
	if len(f) == 0 {
		return false
	}
	for i := 0; i < len(f); i++ {
		tok := f[i]
		if strings.Contains(tok, ":") {
			us, ok := parseIntervalTime(tok)
			if !ok {
				return false
			}
			a.micros += us
			continue
		}
		// A number, possibly with its unit attached ("1day").
		j := 0
		for j < len(tok) && (tok[j] >= '0' && tok[j] <= '9' || tok[j] == '.' || tok[j] == '-' || tok[j] == '+') {
			j++
		}
		n, err := strconv.ParseFloat(tok[:j], 64)
		if err != nil {
			return false
		}
		unit := tok[j:]
		if unit == "" {
			if i+1 < len(f) && !startsNumeric(f[i+1]) {
				i++
				unit = f[i]
			} else {
				unit = "second"
			}
		}
		if !a.add(n, unit) {
			return false
		}
	}
	if ago {
		a.months, a.days, a.micros = -a.months, -a.days, -a.micros
	}
	return true
}

func startsNumeric(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '+' || s[0] == '.')
}

// parseIntervalTime reads [-]h:mm[:ss[.frac]] (hours may exceed 24).
func parseIntervalTime(tok string) (float64, bool) {
	neg := strings.HasPrefix(tok, "-")
	tok = strings.TrimLeft(tok, "+-")
	f := strings.Split(tok, ":")
	if len(f) < 2 || len(f) > 3 {
		return 0, false
	}
	h, err1 := strconv.ParseInt(f[0], 10, 64)
	m, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || m > 59 {
		return 0, false
	}
	us := float64(h)*3600e6 + float64(m)*60e6
	if len(f) == 3 {
		sec, err := strconv.ParseFloat(f[2], 64)
		if err != nil || sec >= 60 || sec < 0 {
			return 0, false
		}
		us += math.Round(sec * 1e6)
	}
	if neg {
		us = -us
	}
	return us, true
}

func (a *intervalAcc) parseISO(v string) bool {
	inTime := false
	any := false
	for v != "" {
		if v[0] == 't' {
			inTime = true
			v = v[1:]
			continue
		}
		j := 0
		for j < len(v) && (v[j] >= '0' && v[j] <= '9' || v[j] == '.' || v[j] == '-' || v[j] == '+') {
			j++
		}
		if j == 0 || j == len(v) {
			return false
		}
		n, err := strconv.ParseFloat(v[:j], 64)
		if err != nil {
			return false
		}
		unit := map[bool]map[byte]string{
			false: {'y': "year", 'm': "month", 'w': "week", 'd': "day"},
			true:  {'h': "hour", 'm': "minute", 's': "second"},
		}[inTime][v[j]]
		if unit == "" || !a.add(n, unit) {
			return false
		}
		any = true
		v = v[j+1:]
	}
	return any
}

func (a *intervalAcc) result() (DInterval, bool) {
	us := math.Round(a.micros)
	if math.Abs(a.months) > math.MaxInt32 || math.Abs(a.days) > math.MaxInt32 || math.Abs(us) >= math.MaxInt64 {
		return DInterval{}, false
	}
	return DInterval{Months: int32(a.months), Days: int32(a.days), Micros: int64(us)}, true
}
