package builtins

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// to_char(number, template) with Postgres's numeric template patterns
// (NUM_processor in formatting.c), for the C locale Cairn runs in:
//
//	9 0     digit positions; 0 prints leading zeros from its position on
//	. D     decimal point
//	, G     group separator (a blank before the number starts)
//	S       sign (+/-) anchored to the number, or in place after it
//	MI      minus in place (blank if positive)
//	PR      negative in angle brackets
//	L       currency symbol (blank in the C locale)
//	FM      fill mode: no padding blanks, no trailing zeros for 9
//
// Double-quoted text is copied; other characters are copied as they are.
// Without S, MI or PR a sign position floats before the first digit
// (blank for positive numbers outside fill mode). A number with more
// integer digits than the template has positions prints as #. PL, SG,
// RN, EEEE, V and TH are 0A000.

type numTok struct {
	kind byte // '9', '0', '.', ',', 'S', 'M' (MI), 'P' (PR), 'L', 'F' (FM), 0 (literal)
	lit  string
}

func parseNumFormat(f string) ([]numTok, error) {
	var toks []numTok
	up := strings.ToUpper(f)
	for i := 0; i < len(f); {
		switch {
		case f[i] == '"':
			j := strings.IndexByte(f[i+1:], '"')
			if j < 0 {
				toks = append(toks, numTok{lit: f[i+1:]})
				i = len(f)
			} else {
				toks = append(toks, numTok{lit: f[i+1 : i+1+j]})
				i += j + 2
			}
			continue
		case f[i] == '9' || f[i] == '0' || f[i] == '.' || f[i] == ',':
			toks = append(toks, numTok{kind: f[i]})
		case up[i] == 'D':
			toks = append(toks, numTok{kind: '.'})
		case up[i] == 'G':
			toks = append(toks, numTok{kind: ','})
		case strings.HasPrefix(up[i:], "FM"):
			toks = append(toks, numTok{kind: 'F'})
			i += 2
			continue
		case strings.HasPrefix(up[i:], "MI"):
			toks = append(toks, numTok{kind: 'M'})
			i += 2
			continue
		case strings.HasPrefix(up[i:], "PR"):
			toks = append(toks, numTok{kind: 'P'})
			i += 2
			continue
		case strings.HasPrefix(up[i:], "PL"), strings.HasPrefix(up[i:], "SG"), strings.HasPrefix(up[i:], "RN"),
			strings.HasPrefix(up[i:], "EEEE"), strings.HasPrefix(up[i:], "TH"), up[i] == 'V':
			return nil, errUnsupported("to_char number pattern %q is not supported", f[i:min(i+2, len(f))])
		case up[i] == 'S':
			toks = append(toks, numTok{kind: 'S'})
		case up[i] == 'L':
			toks = append(toks, numTok{kind: 'L'})
		default:
			toks = append(toks, numTok{lit: f[i : i+1]})
		}
		i++
	}
	return toks, nil
}

// numDigits renders an absolute value with exactly post decimals.
type numDigits func(post int) (digits string, negative bool)

func formatNumber(f string, num numDigits) (string, error) {
	toks, err := parseNumFormat(f)
	if err != nil {
		return "", err
	}
	var pre, post, zeroStart = 0, 0, -1
	dec, fm, signS, signMI, signPR := false, false, false, false, false
	sBefore := false // S comes before every digit position
	digitsSeen := false
	for _, t := range toks {
		switch t.kind {
		case '9', '0':
			digitsSeen = true
			if dec {
				post++
			} else {
				if t.kind == '0' && zeroStart < 0 {
					zeroStart = pre
				}
				pre++
			}
		case '.':
			if dec {
				return "", pgerror.New(pgerrcode.SyntaxError, "multiple decimal points")
			}
			dec = true
		case 'F':
			fm = true
		case 'S':
			// Postgres words the conflict after the pattern it sees second.
			if signMI || signPR {
				return "", pgerror.New(pgerrcode.SyntaxError, "cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together")
			}
			signS = true
			sBefore = !digitsSeen
		case 'M':
			if signS {
				return "", pgerror.New(pgerrcode.SyntaxError, "cannot use \"S\" and \"MI\" together")
			}
			signMI = true
		case 'P':
			if signS || signMI {
				return "", pgerror.New(pgerrcode.SyntaxError, "cannot use \"PR\" and \"S\"/\"PL\"/\"MI\"/\"SG\" together")
			}
			signPR = true
		}
	}
	s, neg := num(post)
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i+1:]
	}
	if strings.Trim(s, "0.") == "" {
		neg = false // rounded to zero
	}
	overflow := len(intPart) > pre
	padded := strings.Repeat(" ", max(pre-len(intPart), 0)) + intPart
	lastRelevant := strings.LastIndexFunc(frac, func(r rune) bool { return r != '0' })

	// The floating sign slot: what goes right before the number's first
	// character.
	slot := ""
	switch {
	case signPR:
		if neg {
			slot = "<"
		} else if !fm {
			slot = " "
		}
	case signS:
		if sBefore {
			slot = "+"
			if neg {
				slot = "-"
			}
		}
	case signMI:
	default:
		if neg {
			slot = "-"
		} else if !fm {
			slot = " "
		}
	}
	var b strings.Builder
	started := false
	start := func() {
		if !started {
			started = true
			b.WriteString(slot)
		}
	}
	blank := func() {
		if !fm {
			b.WriteByte(' ')
		}
	}
	pi, fi := 0, 0
	for _, t := range toks {
		switch t.kind {
		case 0:
			b.WriteString(t.lit)
		case '9', '0':
			if overflow {
				start()
				b.WriteByte('#')
				continue
			}
			if pi < pre {
				c := padded[pi]
				pi++
				switch {
				case c == ' ' && zeroStart >= 0 && pi-1 >= zeroStart:
					start()
					b.WriteByte('0')
				case c == ' ':
					blank()
				case pi-1 == pre-len(intPart) && intPart == "0" && zeroStart < 0 && post != 0:
					// "0.5" with 9.99 prints " .50": no lone leading zero.
					if fm && lastRelevant < 0 {
						start()
						b.WriteByte('0')
					} else {
						blank()
					}
				default:
					start()
					b.WriteByte(c)
				}
				continue
			}
			if fi < len(frac) {
				if fm && fi > lastRelevant && t.kind == '9' {
					fi++
					continue
				}
				start()
				b.WriteByte(frac[fi])
				fi++
			}
		case '.':
			if post == 0 && !fm {
				continue
			}
			start()
			b.WriteByte('.')
		case ',':
			if started {
				b.WriteByte(',')
			} else {
				blank()
			}
		case 'S':
			if !sBefore {
				if neg {
					b.WriteByte('-')
				} else {
					b.WriteByte('+')
				}
			}
		case 'M':
			if neg {
				b.WriteByte('-')
			} else {
				blank()
			}
		case 'P':
			if neg {
				b.WriteByte('>')
			} else {
				blank()
			}
		case 'L':
			blank()
		}
	}
	start()
	return b.String(), nil
}

func decDigits(d *apd.Decimal) numDigits {
	return func(post int) (string, bool) {
		r := quantize(d, int64(post), apd.RoundHalfUp)
		neg := r.Negative
		r.Negative = false
		return r.Text('f'), neg
	}
}

func init() {
	text := types.Text
	numFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		var num numDigits
		switch v := a[0].(type) {
		case types.DInt:
			num = func(post int) (string, bool) {
				s := strconv.FormatInt(int64(v), 10)
				neg := v < 0
				s = strings.TrimPrefix(s, "-")
				if post > 0 {
					s += "." + strings.Repeat("0", post)
				}
				return s, neg
			}
		case types.DFloat:
			f := float64(v)
			num = func(post int) (string, bool) {
				s := strconv.FormatFloat(f, 'f', post, 64)
				return strings.TrimPrefix(s, "-"), strings.HasPrefix(s, "-")
			}
		default:
			d := toDecimal(a[0])
			if d.Form != apd.Finite {
				return nil, errUnsupported("to_char of a non-finite numeric is not supported")
			}
			num = decDigits(d)
		}
		s, err := formatNumber(str(a[1]), num)
		return types.DString(s), err
	}
	for _, t := range []*types.T{types.Int4, types.Int8, types.Float4, types.Float8, types.Numeric} {
		registerFn("to_char", Overload{Args: []*types.T{t, text}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: numFn})
	}
}

// parseNumber is to_number(text, template), read as Postgres's
// NUM_processor reads: every template position consumes one input
// character; a digit position keeps it when it is a digit, the decimal
// point marks the fraction, S/MI/PR and a leading minus give the sign,
// and anything else (group separators, currency, literal text) is
// skipped. Digits beyond the template's positions are ignored, so
// to_number('12.345', '99.99') is 12.34.
func parseNumber(in, f string) (*apd.Decimal, error) {
	toks, err := parseNumFormat(f)
	if err != nil {
		return nil, err
	}
	var digits strings.Builder
	neg, pos := false, 0
	rs := []rune(in)
	if len(rs) > 0 && rs[0] == '<' {
		for _, t := range toks {
			if t.kind == 'P' {
				neg, pos = true, 1
			}
		}
	}
	started := false
	for _, t := range toks {
		if pos >= len(rs) {
			break
		}
		c := rs[pos]
		switch t.kind {
		case '9', '0':
			if !started && (c == '-' || c == '+') {
				// A sign before the first digit is read without using
				// up the position.
				neg = c == '-'
				pos++
				if pos >= len(rs) {
					break
				}
				c = rs[pos]
			}
			if c >= '0' && c <= '9' {
				digits.WriteRune(c)
				started = true
			}
			pos++
		case '.':
			if c == '.' {
				digits.WriteByte('.')
			}
			pos++
		case ',', 'L':
			if c < '0' || c > '9' {
				pos++
			}
		case 'S', 'M':
			if c == '-' || c == '+' {
				neg = c == '-'
				pos++
			}
		case 'P':
			if c == '>' {
				pos++
			}
		case 'F':
		default:
			pos += utf8.RuneCountInString(t.lit)
		}
	}
	s := strings.TrimSuffix(digits.String(), ".")
	if strings.Trim(s, ".") == "" {
		return nil, pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type numeric: \" \"")
	}
	d, _, err := apd.NewFromString(s)
	if err != nil {
		return nil, pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input syntax for type numeric: \"%s\"", s)
	}
	d.Negative = neg && !d.IsZero()
	return d, nil
}

func init() {
	registerFn("to_number", Overload{Args: []*types.T{types.Text, types.Text}, Return: Fixed(types.Numeric), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			d, err := parseNumber(str(a[0]), str(a[1]))
			if err != nil {
				return nil, err
			}
			return newDec(d), nil
		}})
}
