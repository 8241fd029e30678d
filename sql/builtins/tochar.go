package builtins

import (
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// to_char(timestamp[tz], template) with a real template parser: the
// template is split into pattern nodes and literal text once (and
// cached), then each value is printed from the nodes.
//
// Supported patterns: HH HH12 HH24 MI SS MS US AM PM A.M. P.M. (and lower
// case) YYYY YYY YY Y MONTH Month month MON Mon mon MM DAY Day day DY Dy dy
// DDD DD D ID W WW IW Q CC J TZ tz; the FM prefix (no padding) and TH/th
// suffix (ordinal). Double-quoted text is literal, \" is a quote, and any
// other character is copied. Patterns Postgres has and Cairn does not
// (RM, TZH, TZM, OF, SSSS, SSSSS, IYYY, IYY, IY, I, FX, TM, SP, Y,YYY,
// BC/AD and their dotted forms) are 0A000 errors rather than silently
// printed as text.

type tcNode struct {
	pat     string // "" for literal text
	lit     string
	fm, th  bool
	upperTH bool
}

// tcPatterns in matching order: longer before their prefixes.
var tcPatterns = []string{
	"A.M.", "a.m.", "P.M.", "p.m.", "HH24", "hh24", "HH12", "hh12", "YYYY", "yyyy",
	"MONTH", "Month", "month", "YYY", "yyy", "MON", "Mon", "mon", "DAY", "Day", "day",
	"DDD", "ddd", "HH", "hh", "MI", "mi", "SS", "ss", "MS", "ms", "US", "us", "AM", "am", "PM", "pm",
	"YY", "yy", "MM", "mm", "DY", "Dy", "dy", "DD", "dd", "ID", "id", "WW", "ww", "IW", "iw",
	"CC", "cc", "TZ", "tz", "Y", "y", "D", "d", "W", "w", "Q", "q", "J", "j",
}

// tcUnsupported are Postgres patterns Cairn rejects (checked before
// tcPatterns so, e.g., "IYYY" is not read as "I" + "YYY").
var tcUnsupported = []string{
	"Y,YYY", "y,yyy", "SSSSS", "sssss", "SSSS", "ssss", "IYYY", "iyyy", "B.C.", "b.c.", "A.D.", "a.d.",
	"IYY", "iyy", "TZH", "tzh", "TZM", "tzm", "IY", "iy", "RM", "rm", "OF", "of", "FX", "fx", "TM", "tm",
	"SP", "sp", "BC", "bc", "AD", "ad",
}

var toCharCache = struct {
	sync    chan struct{}
	entries map[string][]tcNode
}{make(chan struct{}, 1), map[string][]tcNode{}}

func parseToChar(tmpl string) ([]tcNode, error) {
	toCharCache.sync <- struct{}{}
	nodes, ok := toCharCache.entries[tmpl]
	<-toCharCache.sync
	if ok {
		return nodes, nil
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			nodes = append(nodes, tcNode{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(tmpl); {
		rest := tmpl[i:]
		if rest[0] == '"' {
			j := 1
			for j < len(rest) && rest[j] != '"' {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
				}
				lit.WriteByte(rest[j])
				j++
			}
			i += min(j+1, len(rest))
			continue
		}
		if rest[0] == '\\' && len(rest) > 1 && rest[1] == '"' {
			lit.WriteByte('"')
			i += 2
			continue
		}
		fm := false
		if strings.HasPrefix(rest, "FM") || strings.HasPrefix(rest, "fm") {
			fm, rest = true, rest[2:]
		}
		for _, u := range tcUnsupported {
			if strings.HasPrefix(rest, u) {
				return nil, pgerror.New(pgerrcode.FeatureNotSupported, "to_char pattern \"%s\" is not supported", u)
			}
		}
		matched := ""
		for _, p := range tcPatterns {
			if strings.HasPrefix(rest, p) {
				matched = p
				break
			}
		}
		if matched == "" {
			if fm {
				// A lone FM modifies nothing; Postgres drops it.
				i += 2
				continue
			}
			lit.WriteByte(rest[0])
			i++
			continue
		}
		flush()
		n := tcNode{pat: matched, fm: fm}
		adv := len(matched)
		if fm {
			adv += 2
		}
		if after := rest[len(matched):]; strings.HasPrefix(after, "TH") || strings.HasPrefix(after, "th") {
			n.th, n.upperTH = true, after[0] == 'T'
			adv += 2
		}
		nodes = append(nodes, n)
		i += adv
	}
	flush()
	toCharCache.sync <- struct{}{}
	if len(toCharCache.entries) < 1024 {
		toCharCache.entries[tmpl] = nodes
	}
	<-toCharCache.sync
	return nodes, nil
}

func ordinal(n int64, upper bool) string {
	s := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			s = "st"
		case 2:
			s = "nd"
		case 3:
			s = "rd"
		}
	}
	if upper {
		return strings.ToUpper(s)
	}
	return s
}

// formatToChar prints t (a wall-clock time; zone names t's zone when
// withZone) through the template.
func formatToChar(t time.Time, tmpl string, withZone bool) (string, error) {
	nodes, err := parseToChar(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	y, mon, d := t.Date()
	year := int64(y)
	if year <= 0 {
		year = 1 - year // 1 BC prints as year 1
	}
	for _, n := range nodes {
		if n.pat == "" {
			b.WriteString(n.lit)
			continue
		}
		num := func(v int64, width int) {
			s := strconv.FormatInt(v, 10)
			if !n.fm && len(s) < width {
				s = strings.Repeat("0", width-len(s)) + s
			}
			b.WriteString(s)
			if n.th {
				b.WriteString(ordinal(v, n.upperTH))
			}
		}
		word := func(s string, width int) {
			switch {
			case n.pat == strings.ToUpper(n.pat):
				s = strings.ToUpper(s)
			case n.pat == strings.ToLower(n.pat):
				s = strings.ToLower(s)
			}
			if !n.fm && len(s) < width {
				s += strings.Repeat(" ", width-len(s))
			}
			b.WriteString(s)
		}
		h := t.Hour()
		switch strings.ToUpper(n.pat) {
		case "HH", "HH12":
			num(int64((h+11)%12+1), 2)
		case "HH24":
			num(int64(h), 2)
		case "MI":
			num(int64(t.Minute()), 2)
		case "SS":
			num(int64(t.Second()), 2)
		case "MS":
			num(int64(t.Nanosecond()/1e6), 3)
		case "US":
			num(int64(t.Nanosecond()/1e3), 6)
		case "AM", "PM", "A.M.", "P.M.":
			b.WriteString(meridiem(n.pat, h >= 12))
		case "YYYY":
			num(year, 4)
		case "YYY":
			num(year%1000, 3)
		case "YY":
			num(year%100, 2)
		case "Y":
			num(year%10, 1)
		case "MONTH":
			word(mon.String(), 9)
		case "MON":
			word(mon.String()[:3], 0)
		case "MM":
			num(int64(mon), 2)
		case "DAY":
			word(t.Weekday().String(), 9)
		case "DY":
			word(t.Weekday().String()[:3], 0)
		case "DDD":
			num(int64(t.YearDay()), 3)
		case "DD":
			num(int64(d), 2)
		case "D":
			num(int64(t.Weekday())+1, 1)
		case "ID":
			num(int64((int(t.Weekday())+6)%7+1), 1)
		case "W":
			num(int64((d-1)/7+1), 1)
		case "WW":
			num(int64((t.YearDay()-1)/7+1), 2)
		case "IW":
			_, w := t.ISOWeek()
			num(int64(w), 2)
		case "Q":
			num(int64((mon-1)/3+1), 1)
		case "CC":
			c := (int64(y) + 99) / 100
			if y <= 0 {
				c = -((99 - (int64(y) - 1)) / 100)
			}
			num(c, 2)
		case "J":
			num(floorDivInt64(t.Unix(), 86400)+2440588, 1)
		case "TZ":
			if withZone {
				z, _ := t.Zone()
				if n.pat == "tz" {
					z = strings.ToLower(z)
				}
				b.WriteString(z)
			}
		default:
			return "", errInternal("to_char pattern %q has no printer", n.pat)
		}
	}
	return b.String(), nil
}

func init() {
	registerFn("to_char",
		Overload{Args: []*types.T{types.Timestamp, types.Text}, Return: Fixed(types.Text), Strict: true, Volatility: Stable,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				ts := a[0].(types.DTimestamp)
				if isInfTS(int64(ts)) {
					return types.DNull, nil
				}
				s, err := formatToChar(ts.Time(), str(a[1]), false)
				return types.DString(s), err
			}},
		Overload{Args: []*types.T{types.TimestampTZ, types.Text}, Return: Fixed(types.Text), Strict: true, Volatility: Stable,
			Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
				ts := a[0].(types.DTimestampTZ)
				if isInfTS(int64(ts)) {
					return types.DNull, nil
				}
				s, err := formatToChar(ts.Time().In(location(ctx)), str(a[1]), true)
				return types.DString(s), err
			}},
	)
}

// meridiem is the AM/PM field of to_char as its pattern pat spells it
// (AM, PM, A.M. or P.M., any of them lower case for lower case): the
// morning's or, with pm, the afternoon's.
func meridiem(pat string, pm bool) string {
	s := "AM"
	if pm {
		s = "PM"
	}
	if strings.Contains(pat, ".") {
		s = s[:1] + "." + s[1:] + "."
	}
	if pat[0] >= 'a' {
		s = strings.ToLower(s)
	}
	return s
}
