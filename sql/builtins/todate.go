package builtins

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// to_date(text, template) and to_timestamp(text, template) read a date
// with the to_char template patterns (tochar.go), leniently as Postgres's
// DCH_from_char does: blanks before a number are skipped, a template
// literal skips one input character (a blank skips any run of blanks), a
// number takes as many digits as come unless the next template node is
// another pattern (then exactly the pattern's width: YYYYMMDD). Day
// names, day-of-week and week patterns are read and ignored; TZ and the
// patterns to_char rejects are 0A000.

// fromCharWidth is how many digits a numeric pattern reads at most.
var fromCharWidth = map[string]int{
	"YYYY": 4, "YYY": 3, "YY": 2, "Y": 1, "MM": 2, "DD": 2, "DDD": 3, "HH": 2, "HH12": 2, "HH24": 2,
	"MI": 2, "SS": 2, "MS": 3, "US": 6, "D": 1, "ID": 1, "W": 1, "WW": 2, "IW": 2, "Q": 1, "CC": 2, "J": 7,
}

type fromChar struct {
	year, month, day, doy, hour, min, sec, us, julian   int
	hasYear, hasDoy, hasJulian, pm, hasMeridian, hour12 bool
	yy                                                  int // digits of a YY/YYY/Y year, for the century rule
}

func errFromChar(val, pat, detail string) error {
	return pgerror.New(pgerrcode.InvalidDatetimeFormat, "invalid value \"%s\" for \"%s\"", val, pat).WithDetail("%s", detail)
}

func parseFromChar(input, tmpl string) (*fromChar, error) {
	nodes, err := parseToChar(tmpl)
	if err != nil {
		return nil, err
	}
	fc := &fromChar{month: 1, day: 1, year: 1}
	s := input
	skipBlanks := func() { s = strings.TrimLeftFunc(s, unicode.IsSpace) }
	for ni, n := range nodes {
		if n.pat == "" {
			for _, c := range n.lit {
				if unicode.IsSpace(c) {
					skipBlanks()
				} else if s != "" {
					_, sz := utf8DecodeFirst(s)
					s = s[sz:]
				}
			}
			continue
		}
		up := strings.ToUpper(n.pat)
		if w, ok := fromCharWidth[up]; ok {
			skipBlanks()
			fixed := ni+1 < len(nodes) && nodes[ni+1].pat != "" && !n.fm
			j := 0
			if strings.HasPrefix(s, "-") && (up == "YYYY" || up == "J") {
				j = 1
			}
			for j < len(s) && s[j] >= '0' && s[j] <= '9' && (!fixed || j < w) {
				j++
			}
			if j == 0 || s[:j] == "-" {
				tok := s
				if k := strings.IndexFunc(s, unicode.IsSpace); k >= 0 {
					tok = s[:k]
				}
				return nil, errFromChar(tok, n.pat, "Value must be an integer.")
			}
			v, err := strconv.Atoi(s[:j])
			if err != nil {
				return nil, errFromChar(s[:j], n.pat, "Value must be in the range -2147483648 to 2147483647.")
			}
			digits := j
			s = s[j:]
			switch up {
			case "YYYY":
				fc.year, fc.hasYear = v, true
			case "YYY", "YY", "Y":
				fc.year, fc.hasYear, fc.yy = v, true, digits
			case "MM":
				fc.month = v
			case "DD":
				fc.day = v
			case "DDD":
				fc.doy, fc.hasDoy = v, true
			case "HH", "HH12":
				fc.hour, fc.hour12 = v, true
			case "HH24":
				fc.hour = v
			case "MI":
				fc.min = v
			case "SS":
				fc.sec = v
			case "MS":
				// Postgres reads MS (and US) digits as a fraction: "5" is 500 ms.
				for k := digits; k < 3; k++ {
					v *= 10
				}
				fc.us += v * 1000
			case "US":
				for k := digits; k < 6; k++ {
					v *= 10
				}
				fc.us += v
			case "J":
				fc.julian, fc.hasJulian = v, true
			}
			continue
		}
		switch up {
		case "MON", "MONTH":
			skipBlanks()
			m, sz := matchName(s, monthNames, up == "MON")
			if m < 0 {
				return nil, errFromChar(firstWord(s), n.pat, "The given value did not match any of the allowed values for this field.")
			}
			fc.month, s = m+1, s[sz:]
		case "DY", "DAY":
			skipBlanks()
			d, sz := matchName(s, dayNames, up == "DY")
			if d < 0 {
				return nil, errFromChar(firstWord(s), n.pat, "The given value did not match any of the allowed values for this field.")
			}
			s = s[sz:]
		case "AM", "PM", "A.M.", "P.M.":
			skipBlanks()
			u := strings.ToUpper(s)
			switch {
			case strings.HasPrefix(u, "AM"), strings.HasPrefix(u, "PM"):
				fc.pm, s = u[0] == 'P', s[2:]
			case strings.HasPrefix(u, "A.M."), strings.HasPrefix(u, "P.M."):
				fc.pm, s = u[0] == 'P', s[4:]
			default:
				return nil, errFromChar(firstWord(s), n.pat, "The given value did not match any of the allowed values for this field.")
			}
			fc.hasMeridian = true
		default:
			return nil, errUnsupported("to_date/to_timestamp pattern \"%s\" is not supported", n.pat)
		}
	}
	if strings.TrimSpace(s) != "" && len(nodes) == 0 {
		return nil, pgerror.New(pgerrcode.InvalidDatetimeFormat, "invalid input string for \"%s\"", tmpl)
	}
	return fc, nil
}

var monthNames = []string{"january", "february", "march", "april", "may", "june", "july", "august",
	"september", "october", "november", "december"}
var dayNames = []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

// matchName matches the start of s against names (case-insensitively),
// by their three-letter abbreviation when abbrev is set; it returns the
// index and the bytes consumed, or -1.
func matchName(s string, names []string, abbrev bool) (int, int) {
	l := strings.ToLower(s)
	for i, n := range names {
		if abbrev {
			n = n[:3]
		}
		if strings.HasPrefix(l, n) {
			return i, len(n)
		}
	}
	return -1, 0
}

func firstWord(s string) string {
	if k := strings.IndexFunc(s, unicode.IsSpace); k >= 0 {
		return s[:k]
	}
	return s
}

func utf8DecodeFirst(s string) (rune, int) {
	for _, r := range s {
		return r, len(string(r))
	}
	return 0, 0
}

// wall turns the fields into a wall-clock time, checking them as
// Postgres does (22008 for an impossible date or time).
func (fc *fromChar) wall(input string) (time.Time, error) {
	y := fc.year
	if fc.yy > 0 && fc.yy < 4 {
		// Postgres's century rule: YY 70-99 is 19xx, 00-69 20xx; Y and
		// YYY pick the nearest year to 2020 likewise.
		switch fc.yy {
		case 1:
			y += 2000
		case 2:
			if y < 70 {
				y += 2000
			} else {
				y += 1900
			}
		case 3:
			if y < 100 {
				y += 2000
			} else {
				y += 1000
			}
		}
	}
	if y <= 0 {
		y++ // year 0 does not exist; -1 is 1 BC
	}
	h := fc.hour
	if fc.hour12 || fc.hasMeridian {
		if fc.hasMeridian && (h < 1 || h > 12) {
			return time.Time{}, pgerror.New(pgerrcode.InvalidDatetimeFormat,
				"hour \"%d\" is invalid for the 12-hour clock", h).WithHint("Use the 24-hour clock, or give an hour between 1 and 12.")
		}
		if fc.pm && h < 12 {
			h += 12
		} else if !fc.pm && h == 12 {
			h = 0
		}
	}
	bad := func() error {
		return pgerror.New(pgerrcode.DatetimeFieldOverflow, "date/time field value out of range: \"%s\"", input)
	}
	if fc.hasJulian {
		t := time.Date(-4713, time.November, 24, 0, 0, 0, 0, time.UTC).AddDate(0, 0, fc.julian)
		return t.Add(time.Duration(h)*time.Hour + time.Duration(fc.min)*time.Minute +
			time.Duration(fc.sec)*time.Second + time.Duration(fc.us)*time.Microsecond), nil
	}
	if fc.hasDoy {
		if fc.doy < 1 || fc.doy > 366 {
			return time.Time{}, bad()
		}
		d := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, fc.doy-1)
		fc.month, fc.day = int(d.Month()), d.Day()
	}
	if fc.month < 1 || fc.month > 12 || fc.day < 1 || fc.day > daysInMonth(y, time.Month(fc.month)) {
		return time.Time{}, bad()
	}
	if h > 24 || fc.min > 59 || fc.sec > 60 || h == 24 && (fc.min > 0 || fc.sec > 0 || fc.us > 0) {
		return time.Time{}, bad()
	}
	return time.Date(y, time.Month(fc.month), fc.day, h, fc.min, fc.sec, fc.us*1000, time.UTC), nil
}

func init() {
	text := types.Text
	registerFn("to_date", Overload{Args: []*types.T{text, text}, Return: Fixed(types.Date), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			fc, err := parseFromChar(str(a[0]), str(a[1]))
			if err != nil {
				return nil, err
			}
			fc.hour, fc.min, fc.sec, fc.us, fc.hasMeridian, fc.hour12 = 0, 0, 0, 0, false, false
			w, err := fc.wall(str(a[0]))
			if err != nil {
				return nil, err
			}
			if w.Year() > 5874897 || w.Year() < -4712 {
				return nil, pgerror.New(pgerrcode.DatetimeFieldOverflow, "date out of range: \"%s\"", str(a[0]))
			}
			return types.DDate(int64(types.TimestampFromTime(w)) / microsPerDay), nil
		}})
	registerFn("to_timestamp", Overload{Args: []*types.T{text, text}, Return: Fixed(types.TimestampTZ), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			fc, err := parseFromChar(str(a[0]), str(a[1]))
			if err != nil {
				return nil, err
			}
			w, err := fc.wall(str(a[0]))
			if err != nil {
				return nil, err
			}
			return checkTimestamp(types.TimestampTZFromTime(wallToInstant(w, location(ctx))))
		}})
}
