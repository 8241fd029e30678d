package types

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// dateTimeParts is what parseDateTimeParts found in a date/time literal.
type dateTimeParts struct {
	hasDate        bool
	year, mon, day int
	hasTime        bool
	micros         int64 // time of day, 0 to 24h inclusive
	loc            *time.Location
	offset         int // seconds east of UTC when loc == nil and hasZone
	hasZone        bool
}

// parseDateTime reads date, time, timestamp and timestamptz literals in the
// ISO forms Postgres prints and the common variants drivers send:
// "2024-01-02", "2024-01-02 03:04:05.123456", "2024-01-02T03:04:05Z",
// "... +05:30", "... America/New_York", "... BC", "01/02/2024" (MDY),
// "03:04:05", plus infinity, -infinity and epoch. Relative words (now,
// today) need a clock and are the evaluator's job.
func parseDateTime(ctx *Context, t *T, s string) (Datum, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "infinity", "+infinity", "-infinity":
		if t.Family == TimeFamily {
			return nil, errDatetimeSyntax(t, s)
		}
		neg := v == "-infinity"
		switch t.Family {
		case DateFamily:
			if neg {
				return DateNegInfinity, nil
			}
			return DatePosInfinity, nil
		case TimestampFamily:
			if neg {
				return DTimestamp(TimestampNegInfinity), nil
			}
			return DTimestamp(TimestampPosInfinity), nil
		default:
			if neg {
				return DTimestampTZ(TimestampNegInfinity), nil
			}
			return DTimestampTZ(TimestampPosInfinity), nil
		}
	case "epoch":
		v = "1970-01-01 00:00:00+00"
	case "allballs":
		v = "00:00:00"
	}
	p, err := parseDateTimeParts(v)
	if err != nil {
		if err == errFieldRange {
			return nil, errDatetimeField(s)
		}
		return nil, errDatetimeSyntax(t, s)
	}
	if t.Family == TimeFamily {
		if !p.hasTime {
			return nil, errDatetimeSyntax(t, s)
		}
		return roundTime(t, DTime(p.micros)), nil
	}
	if !p.hasDate {
		return nil, errDatetimeSyntax(t, s)
	}
	// Days since 1970 from the civil date, via time.Date (proleptic
	// Gregorian, which is what Postgres uses too).
	days := time.Date(p.year, time.Month(p.mon), p.day, 0, 0, 0, 0, time.UTC).Unix() / 86400
	if t.Family == DateFamily {
		if days < minDateDays || days >= maxDateDays {
			return nil, errDatetimeRange(t)
		}
		return DDate(days), nil
	}
	if days < minDateDays-1 || days > maxTimestamp/microsPerDay+1 {
		return nil, errDatetimeRange(t)
	}
	wall := days*microsPerDay + p.micros
	if t.Family == TimestampFamily {
		return checkTimestamp(t, roundTimestamp(t, wall))
	}
	var utc int64
	switch {
	case p.hasZone && p.loc == nil:
		utc = wall - int64(p.offset)*microsPerSec
	default:
		loc := p.loc
		if loc == nil {
			loc = ctx.location()
		}
		utc = wallToUTC(wall, loc)
	}
	d, err := checkTimestamp(t, roundTimestamp(t, utc))
	if err != nil {
		return nil, err
	}
	return DTimestampTZ(d.(DTimestamp)), nil
}

func checkTimestamp(t *T, us int64) (Datum, error) {
	if us < minTimestamp || us >= maxTimestamp {
		return nil, errDatetimeRange(t)
	}
	return DTimestamp(us), nil
}

// wallToUTC converts a wall-clock time in loc to UTC microseconds. For a
// wall time that does not exist or is ambiguous (DST), time.Date's choice
// applies.
func wallToUTC(wall int64, loc *time.Location) int64 {
	w := microsToTime(wall)
	l := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	return l.Unix()*microsPerSec + int64(l.Nanosecond()/1000)
}

// utcToWall converts UTC microseconds to the wall clock in loc.
func utcToWall(utc int64, loc *time.Location) int64 {
	_, off := microsToTime(utc).In(loc).Zone()
	return utc + int64(off)*microsPerSec
}

// roundTimestamp rounds microseconds to t's fractional precision.
func roundTimestamp(t *T, us int64) int64 {
	if t.Precision < 0 || t.Precision >= 6 || us == TimestampNegInfinity || us == TimestampPosInfinity {
		return us
	}
	// Round half away from zero on Postgres's own epoch (2000-01-01), so
	// ties land where Postgres puts them.
	const pgEpoch = 946684800 * microsPerSec
	unit := int64(math.Pow10(int(6 - t.Precision)))
	rel := us - pgEpoch
	if rel >= 0 {
		rel = (rel + unit/2) / unit * unit
	} else {
		rel = -((-rel + unit/2) / unit * unit)
	}
	return rel + pgEpoch
}

func roundTime(t *T, d DTime) DTime {
	return DTime(roundTimestamp(t, int64(d)))
}

type dtError string

func (e dtError) Error() string { return string(e) }

const (
	errFieldSyntax = dtError("syntax")
	errFieldRange  = dtError("range")
)

func parseDateTimeParts(v string) (dateTimeParts, error) {
	var p dateTimeParts
	bc := false
	if rest, ok := strings.CutSuffix(v, " bc"); ok {
		v, bc = strings.TrimSpace(rest), true
	} else if rest, ok := strings.CutSuffix(v, " ad"); ok {
		v = strings.TrimSpace(rest)
	}
	// Date part: up to the first space or 'T' that follows digits.
	rest := v
	if i := strings.IndexAny(v, "-/"); i > 0 && !strings.Contains(v[:i], ":") {
		end := strings.IndexAny(v, " t")
		if end < 0 {
			end = len(v)
		}
		datePart := v[:end]
		rest = strings.TrimSpace(strings.TrimPrefix(v[end:], "t"))
		if err := p.parseDate(datePart); err != nil {
			return p, err
		}
		if bc {
			p.year = 1 - p.year
		}
	} else if bc {
		return p, errFieldSyntax
	}
	if rest == "" {
		return p, nil
	}
	// Time part: digits and colons and a fraction, then an optional zone.
	end := 0
	for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || rest[end] == ':' || rest[end] == '.') {
		end++
	}
	if end == 0 {
		if !p.hasDate {
			return p, errFieldSyntax
		}
	} else {
		if err := p.parseTime(rest[:end]); err != nil {
			return p, err
		}
	}
	zone := strings.TrimSpace(rest[end:])
	if zone != "" {
		if err := p.parseZone(zone); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (p *dateTimeParts) parseDate(s string) error {
	sep := "-"
	if strings.Contains(s, "/") {
		sep = "/"
	}
	f := strings.Split(s, sep)
	if len(f) != 3 {
		return errFieldSyntax
	}
	nums := make([]int, 3)
	for i, x := range f {
		n, err := strconv.Atoi(x)
		if err != nil || x == "" || x[0] == '+' || x[0] == '-' {
			return errFieldSyntax
		}
		nums[i] = n
	}
	if sep == "/" { // DateStyle MDY, Postgres's default
		p.mon, p.day, p.year = nums[0], nums[1], nums[2]
	} else {
		if len(f[0]) < 3 && len(f[0]) != 0 {
			// Two-digit leading year (YY-MM-DD) is ambiguous; reject.
			return errFieldSyntax
		}
		p.year, p.mon, p.day = nums[0], nums[1], nums[2]
	}
	if p.year == 0 || p.mon < 1 || p.mon > 12 || p.day < 1 || p.day > daysIn(p.year, p.mon) {
		return errFieldRange
	}
	p.hasDate = true
	return nil
}

func daysIn(year, mon int) int {
	return time.Date(year, time.Month(mon)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func (p *dateTimeParts) parseTime(s string) error {
	f := strings.Split(s, ":")
	if len(f) < 2 || len(f) > 3 {
		return errFieldSyntax
	}
	h, err1 := strconv.Atoi(f[0])
	m, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || len(f[1]) != 2 {
		return errFieldSyntax
	}
	var us int64
	if len(f) == 3 {
		secStr, frac, _ := strings.Cut(f[2], ".")
		sec, err := strconv.Atoi(secStr)
		if err != nil || len(secStr) != 2 {
			return errFieldSyntax
		}
		if sec > 60 {
			return errFieldRange
		}
		us = int64(sec) * microsPerSec
		if frac != "" {
			if strings.Trim(frac, "0123456789") != "" {
				return errFieldSyntax
			}
			// Round to microseconds, half away from zero.
			digits := (frac + "0000000")[:7]
			n, _ := strconv.ParseInt(digits, 10, 64)
			us += (n + 5) / 10
		}
	}
	if h > 24 || m > 59 {
		return errFieldRange
	}
	us += int64(h)*3600*microsPerSec + int64(m)*60*microsPerSec
	if us > 24*3600*microsPerSec {
		return errFieldRange
	}
	p.micros, p.hasTime = us, true
	return nil
}

// parseZone accepts Z, UTC/GMT, numeric offsets (+05, +05:30, +0530,
// +05:30:15) and IANA names.
func (p *dateTimeParts) parseZone(z string) error {
	p.hasZone = true
	switch z {
	case "z", "utc", "gmt", "zulu":
		return nil
	}
	if z[0] == '+' || z[0] == '-' {
		sign := 1
		if z[0] == '-' {
			sign = -1
		}
		digits := strings.ReplaceAll(z[1:], ":", "")
		if digits == "" || strings.Trim(digits, "0123456789") != "" || len(digits) > 6 || len(digits)%2 != 0 && len(digits) != 1 {
			return errFieldSyntax
		}
		if len(digits) == 1 {
			digits = "0" + digits
		}
		digits = (digits + "0000")[:6]
		h, _ := strconv.Atoi(digits[:2])
		m, _ := strconv.Atoi(digits[2:4])
		sec, _ := strconv.Atoi(digits[4:6])
		if h > 15 || m > 59 || sec > 59 {
			return errFieldRange
		}
		p.offset = sign * (h*3600 + m*60 + sec)
		return nil
	}
	// IANA names are case-sensitive on disk; try the common spellings.
	for _, name := range []string{z, titleZone(z), strings.ToUpper(z)} {
		if loc, err := time.LoadLocation(name); err == nil {
			p.loc = loc
			return nil
		}
	}
	return errFieldSyntax
}

// titleZone turns "america/new_york" into "America/New_York".
func titleZone(z string) string {
	b := []byte(z)
	up := true
	for i, c := range b {
		if up && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == '/' || c == '_' || c == '-'
	}
	return string(b)
}
