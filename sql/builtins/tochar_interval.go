package builtins

import (
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/sql/types"
)

// to_char(interval, template): Postgres splits the interval into years,
// months, days and a time of day whose hours are not reduced modulo 24
// (interval2tm), then prints the numeric patterns from those fields, each
// padded as C's "%0*d" does (HH, HH24, MI, SS, MM and YYYY one column
// wider when negative). Name, week and zone patterns, meaningless for an
// interval, are 0A000 here.

func formatIntervalToChar(iv types.DInterval, tmpl string) (string, error) {
	nodes, err := parseToChar(tmpl)
	if err != nil {
		return "", err
	}
	year, mon := int64(iv.Months/12), int64(iv.Months%12)
	day := int64(iv.Days)
	us := iv.Micros
	hour := us / 3_600_000_000
	us -= hour * 3_600_000_000
	min := us / 60_000_000
	us -= min * 60_000_000
	sec := us / 1_000_000
	frac := us - sec*1_000_000
	var b strings.Builder
	for _, n := range nodes {
		if n.pat == "" {
			b.WriteString(n.lit)
			continue
		}
		num := func(v int64, width int) {
			if n.fm {
				width = 0
			}
			s := strconv.FormatInt(v, 10)
			if len(s) < width {
				if v < 0 {
					s = "-" + strings.Repeat("0", width-len(s)) + s[1:]
				} else {
					s = strings.Repeat("0", width-len(s)) + s
				}
			}
			b.WriteString(s)
			if n.th {
				b.WriteString(ordinal(v, n.upperTH))
			}
		}
		// numW is num for the patterns Postgres prints one column wider
		// when negative.
		numW := func(v int64, width int) {
			if v < 0 {
				width++
			}
			num(v, width)
		}
		switch strings.ToUpper(n.pat) {
		case "HH", "HH12":
			h := hour % 12
			if h == 0 {
				h = 12
			}
			numW(h, 2)
		case "HH24":
			numW(hour, 2)
		case "MI":
			numW(min, 2)
		case "SS":
			numW(sec, 2)
		case "MS":
			num(frac/1000, 3)
		case "US":
			num(frac, 6)
		case "AM", "PM", "A.M.", "P.M.":
			b.WriteString(meridiem(n.pat, hour%24 >= 12))
		case "YYYY":
			numW(year, 4)
		case "YYY":
			num(year%1000, 3)
		case "YY":
			num(year%100, 2)
		case "Y":
			num(year%10, 1)
		case "MM":
			numW(mon, 2)
		case "DD":
			num(day, 2)
		case "DDD":
			num((year*12+mon)*30+day, 3)
		default:
			return "", errUnsupported("to_char pattern \"%s\" is not supported for an interval", n.pat)
		}
	}
	return b.String(), nil
}

func init() {
	registerFn("to_char", Overload{Args: []*types.T{types.Interval, types.Text}, Return: Fixed(types.Text), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			s, err := formatIntervalToChar(a[0].(types.DInterval), str(a[1]))
			return types.DString(s), err
		}})
}
