package builtins

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// String functions count characters (runes), not bytes, as Postgres does
// in a UTF-8 database.

func str(d types.Datum) string { return rawString(d) }

func i64(d types.Datum) int64 { return int64(d.(types.DInt)) }

func textFn(name string, args []*types.T, ret *types.T, f func(a []types.Datum) (types.Datum, error)) {
	registerFn(name, Overload{Args: args, Return: Fixed(ret), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) { return f(a) }})
}

// substring is substr(s, start[, count]) with Postgres's rules for starts
// before 1 (the count still runs from start) and negative counts (22011).
func substring(s string, start int64, count int64, hasCount bool) (string, error) {
	if hasCount && count < 0 {
		return "", pgerror.New(pgerrcode.SubstringError, "negative substring length not allowed")
	}
	rs := []rune(s)
	from := start - 1
	to := int64(len(rs))
	if hasCount {
		to = min(to, from+count)
		if from+count < from { // overflow: treat as unbounded
			to = int64(len(rs))
		}
	}
	from = max(from, 0)
	if from >= to || from >= int64(len(rs)) {
		return "", nil
	}
	return string(rs[from:to]), nil
}

// maxTextValue is the largest text value a function builds (PostgreSQL's
// MaxAllocSize, 1 GB): past it, 54000 before anything is allocated, so
// one call cannot take the node's memory (lpad('x', 2000000000) would
// otherwise allocate 8 GB of runes).
const maxTextValue = 1 << 30

func errLengthTooLarge() error {
	return pgerror.New(pgerrcode.ProgramLimitExceeded, "requested length too large")
}

func pad(s string, n int64, fill string, left bool) (string, error) {
	if n <= 0 {
		return "", nil
	}
	rs := []rune(s)
	fr := []rune(fill)
	if len(fr) == 0 {
		n = min(n, int64(len(rs))) // nothing to pad with
	}
	// PostgreSQL's bound: the worst case, 4 bytes a character in UTF-8,
	// plus a header, within MaxAllocSize.
	if 4*n+4 > maxTextValue-1 {
		return "", errLengthTooLarge()
	}
	if int64(len(rs)) >= n {
		return string(rs[:n]), nil
	}
	need := int(n) - len(rs)
	p := make([]rune, need)
	for i := range p {
		p[i] = fr[i%len(fr)]
	}
	if left {
		return string(p) + s, nil
	}
	return s + string(p), nil
}

func initcap(s string) string {
	var b strings.Builder
	prevAlnum := false
	for _, r := range s {
		if prevAlnum {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToUpper(r))
		}
		prevAlnum = unicode.IsLetter(r) || unicode.IsDigit(r)
	}
	return b.String()
}

func trimChars(s, chars string, left, right bool) string {
	f := func(r rune) bool { return strings.ContainsRune(chars, r) }
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s
}

func translate(s, from, to string) string {
	fr, tr := []rune(from), []rune(to)
	var b strings.Builder
	for _, r := range s {
		i := -1
		for j, f := range fr {
			if f == r {
				i = j
				break
			}
		}
		switch {
		case i < 0:
			b.WriteRune(r)
		case i < len(tr):
			b.WriteRune(tr[i])
		}
	}
	return b.String()
}

func reverse(s string) string {
	rs := []rune(s)
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return string(rs)
}

// QuoteIdent quotes an identifier when Postgres's quote_ident would: unless
// it is lower-case letters, digits and underscores not starting with a
// digit. (Cairn does not yet quote unreserved keywords that are otherwise
// plain, which Postgres also leaves bare; reserved ones like "select" are
// quoted.)
func QuoteIdent(s string) string {
	safe := s != "" && (s[0] >= 'a' && s[0] <= 'z' || s[0] == '_')
	for i := 0; i < len(s) && safe; i++ {
		c := s[i]
		safe = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if safe && !reservedWords[s] {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// reservedWords are Postgres's reserved keywords (quote_ident quotes them).
var reservedWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`all analyse analyze and any array as asc asymmetric both case cast check
		collate column constraint create current_catalog current_date current_role current_time
		current_timestamp current_user default deferrable desc distinct do else end except false fetch
		for foreign from grant group having in initially intersect into lateral leading limit localtime
		localtimestamp not null offset on only or order placing primary references returning select
		session_user some symmetric table then to trailing true union unique user using variadic when
		where window with authorization binary collation concurrently cross current_schema freeze full
		ilike inner is isnull join left like natural notnull outer overlaps right similar tablesample verbose`) {
		m[w] = true
	}
	return m
}()

// QuoteLiteral quotes a string as quote_literal does: doubled quotes, and
// an E” string with doubled backslashes when it holds a backslash.
func QuoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

func splitPart(s, delim string, n int64) (string, error) {
	if n == 0 {
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "field position must not be zero")
	}
	if delim == "" {
		if n == 1 || n == -1 {
			return s, nil
		}
		return "", nil
	}
	parts := strings.Split(s, delim)
	if s == "" {
		return "", nil
	}
	if n < 0 {
		n += int64(len(parts)) + 1
	}
	if n < 1 || n > int64(len(parts)) {
		return "", nil
	}
	return parts[n-1], nil
}

func encode(b []byte, format string) (string, error) {
	switch strings.ToLower(format) {
	case "hex":
		return hex.EncodeToString(b), nil
	case "base64":
		// Postgres wraps base64 lines at 76 characters.
		s := base64.StdEncoding.EncodeToString(b)
		var out strings.Builder
		for len(s) > 76 {
			out.WriteString(s[:76])
			out.WriteByte('\n')
			s = s[76:]
		}
		out.WriteString(s)
		return out.String(), nil
	case "escape":
		var out strings.Builder
		for _, c := range b {
			switch {
			case c == '\\':
				out.WriteString(`\\`)
			case c == 0 || c >= 0x80:
				fmt.Fprintf(&out, `\%03o`, c)
			default:
				out.WriteByte(c)
			}
		}
		return out.String(), nil
	}
	return "", pgerror.New(pgerrcode.InvalidParameterValue, "unrecognized encoding: \"%s\"", format)
}

func decode(s, format string) ([]byte, error) {
	switch strings.ToLower(format) {
	case "hex":
		b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			return nil, pgerror.New(pgerrcode.InvalidParameterValue, "invalid hexadecimal data: odd number of digits")
		}
		return b, nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			return nil, pgerror.New(pgerrcode.InvalidParameterValue, "invalid base64 end sequence").
				WithHint("Input data is missing padding, is truncated, or is otherwise corrupted.")
		}
		return b, nil
	case "escape":
		d, err := types.ParseDatum(nil, types.Bytea, strings.ReplaceAll(s, `\x`, `\\x`))
		if err != nil {
			return nil, err
		}
		return []byte(d.(types.DBytes)), nil
	}
	return nil, pgerror.New(pgerrcode.InvalidParameterValue, "unrecognized encoding: \"%s\"", format)
}

// format implements format() with %s, %I, %L and %%, with positions
// (%2$s); widths and flags are not supported (22023).
func formatFn(ctx EvalContext, fmtStr string, args []types.Datum) (string, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(fmtStr); i++ {
		c := fmtStr[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(fmtStr) {
			return "", errInvalidParam("unterminated format() type specifier").
				WithHint("For a single \"%%\" use \"%%%%\".")
		}
		if fmtStr[i] == '%' {
			b.WriteByte('%')
			continue
		}
		argIdx, explicitPos := next, false
		j := i
		for j < len(fmtStr) && fmtStr[j] >= '0' && fmtStr[j] <= '9' {
			j++
		}
		if j > i && j < len(fmtStr) && fmtStr[j] == '$' {
			n, _ := strconv.Atoi(fmtStr[i:j])
			if n == 0 {
				return "", errInvalidParam("format specifies argument 0, but arguments are numbered from 1")
			}
			argIdx, explicitPos = n-1, true
			i = j + 1
		}
		// Flags and width: %-10s pads on the right, %10s on the left,
		// %*s takes the width from the next argument (%*2$s from the 2nd),
		// a negative one meaning left-justified.
		leftAlign, width := false, 0
		for i < len(fmtStr) && fmtStr[i] == '-' {
			leftAlign = true
			i++
		}
		if i < len(fmtStr) && fmtStr[i] == '*' {
			i++
			wIdx := next
			j := i
			for j < len(fmtStr) && fmtStr[j] >= '0' && fmtStr[j] <= '9' {
				j++
			}
			if j > i && j < len(fmtStr) && fmtStr[j] == '$' {
				n, _ := strconv.Atoi(fmtStr[i:j])
				if n == 0 {
					return "", errInvalidParam("format specifies argument 0, but arguments are numbered from 1")
				}
				wIdx, i = n-1, j+1
			}
			if wIdx >= len(args) {
				return "", errInvalidParam("too few arguments for format()")
			}
			if w := args[wIdx]; !types.IsNull(w) {
				n, err := strconv.Atoi(str(w))
				if err != nil {
					return "", errInvalidParam("invalid width argument for format()")
				}
				if n < 0 {
					leftAlign, n = true, -n
				}
				width = n
			}
			next = wIdx + 1
			if !explicitPos {
				argIdx = next
			}
		} else {
			j := i
			for j < len(fmtStr) && fmtStr[j] >= '0' && fmtStr[j] <= '9' {
				j++
			}
			if j > i {
				width, _ = strconv.Atoi(fmtStr[i:j])
				i = j
			}
		}
		if i >= len(fmtStr) {
			return "", errInvalidParam("unterminated format() type specifier").
				WithHint("For a single \"%%\" use \"%%%%\".")
		}
		if int64(b.Len())+int64(width) > maxTextValue {
			return "", pgerror.New(pgerrcode.ProgramLimitExceeded, "out of memory").
				WithDetail("Cannot enlarge string buffer containing %d bytes by %d more bytes.", b.Len(), width)
		}
		if argIdx >= len(args) {
			return "", errInvalidParam("too few arguments for format()")
		}
		next = argIdx + 1
		a := args[argIdx]
		start := b.Len()
		if err := formatOne(&b, fmtStr[i], a); err != nil {
			return "", err
		}
		if pad := width - utf8.RuneCountInString(b.String()[start:]); pad > 0 {
			if leftAlign {
				b.WriteString(strings.Repeat(" ", pad))
			} else {
				v := b.String()[start:]
				out := b.String()[:start] + strings.Repeat(" ", pad) + v
				b.Reset()
				b.WriteString(out)
			}
		}
	}
	return b.String(), nil
}

// formatOne writes one format() conversion of a.
func formatOne(b *strings.Builder, conv byte, a types.Datum) error {
	switch conv {
	case 's':
		if !types.IsNull(a) {
			b.WriteString(str(a))
		}
	case 'I':
		if types.IsNull(a) {
			return pgerror.New(pgerrcode.NullValueNotAllowedDataException, "null values cannot be formatted as an SQL identifier")
		}
		b.WriteString(QuoteIdent(str(a)))
	case 'L':
		if types.IsNull(a) {
			b.WriteString("NULL")
		} else {
			b.WriteString(QuoteLiteral(str(a)))
		}
	default:
		return errInvalidParam("unrecognized format() type specifier \"%c\"", conv).
			WithHint("For a single \"%%\" use \"%%%%\".")
	}
	return nil
}

func init() {
	text, i4, b := types.Text, types.Int4, types.Bool
	t1 := []*types.T{text}
	textFn("length", t1, i4, func(a []types.Datum) (types.Datum, error) { return types.DInt(utf8.RuneCountInString(str(a[0]))), nil })
	textFn("length", []*types.T{types.Bytea}, i4, func(a []types.Datum) (types.Datum, error) { return types.DInt(len(str(a[0]))), nil })
	for _, n := range []string{"char_length", "character_length"} {
		textFn(n, t1, i4, func(a []types.Datum) (types.Datum, error) { return types.DInt(utf8.RuneCountInString(str(a[0]))), nil })
	}
	textFn("octet_length", t1, i4, func(a []types.Datum) (types.Datum, error) { return types.DInt(len(str(a[0]))), nil })
	textFn("octet_length", []*types.T{types.Bytea}, i4, func(a []types.Datum) (types.Datum, error) { return types.DInt(len(str(a[0]))), nil })
	textFn("bit_length", t1, i4, func(a []types.Datum) (types.Datum, error) { return types.DInt(8 * len(str(a[0]))), nil })
	textFn("lower", t1, text, func(a []types.Datum) (types.Datum, error) { return types.DString(strings.ToLower(str(a[0]))), nil })
	textFn("upper", t1, text, func(a []types.Datum) (types.Datum, error) { return types.DString(strings.ToUpper(str(a[0]))), nil })
	textFn("initcap", t1, text, func(a []types.Datum) (types.Datum, error) { return types.DString(initcap(str(a[0]))), nil })
	for _, n := range []string{"substr", "substring"} {
		textFn(n, []*types.T{text, i4}, text, func(a []types.Datum) (types.Datum, error) {
			s, err := substring(str(a[0]), i64(a[1]), 0, false)
			return types.DString(s), err
		})
		textFn(n, []*types.T{text, i4, i4}, text, func(a []types.Datum) (types.Datum, error) {
			s, err := substring(str(a[0]), i64(a[1]), i64(a[2]), true)
			return types.DString(s), err
		})
	}
	for _, n := range []string{"strpos", "position"} {
		textFn(n, []*types.T{text, text}, i4, func(a []types.Datum) (types.Datum, error) {
			s, sub := str(a[0]), str(a[1])
			i := strings.Index(s, sub)
			if i < 0 {
				return types.DInt(0), nil
			}
			return types.DInt(utf8.RuneCountInString(s[:i]) + 1), nil
		})
	}
	textFn("replace", []*types.T{text, text, text}, text, func(a []types.Datum) (types.Datum, error) {
		from, to := str(a[1]), str(a[2])
		if from == "" {
			return a[0], nil
		}
		if len(to) > len(from) && int64(len(str(a[0])))+int64(strings.Count(str(a[0]), from))*int64(len(to)-len(from)) > maxTextValue {
			return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "out of memory").
				WithDetail("The result of replace() would exceed 1 GB.")
		}
		return types.DString(strings.ReplaceAll(str(a[0]), from, to)), nil
	})
	textFn("translate", []*types.T{text, text, text}, text, func(a []types.Datum) (types.Datum, error) {
		return types.DString(translate(str(a[0]), str(a[1]), str(a[2]))), nil
	})
	for _, n := range []struct {
		name        string
		left, right bool
	}{{"btrim", true, true}, {"trim", true, true}, {"ltrim", true, false}, {"rtrim", false, true}} {
		textFn(n.name, t1, text, func(a []types.Datum) (types.Datum, error) {
			return types.DString(trimChars(str(a[0]), " ", n.left, n.right)), nil
		})
		textFn(n.name, []*types.T{text, text}, text, func(a []types.Datum) (types.Datum, error) {
			return types.DString(trimChars(str(a[0]), str(a[1]), n.left, n.right)), nil
		})
	}
	for _, n := range []string{"lpad", "rpad"} {
		left := n == "lpad"
		textFn(n, []*types.T{text, i4}, text, func(a []types.Datum) (types.Datum, error) {
			p, err := pad(str(a[0]), i64(a[1]), " ", left)
			return types.DString(p), err
		})
		textFn(n, []*types.T{text, i4, text}, text, func(a []types.Datum) (types.Datum, error) {
			p, err := pad(str(a[0]), i64(a[1]), str(a[2]), left)
			return types.DString(p), err
		})
	}
	textFn("left", []*types.T{text, i4}, text, func(a []types.Datum) (types.Datum, error) {
		rs, n := []rune(str(a[0])), i64(a[1])
		if n < 0 {
			n = max(int64(len(rs))+n, 0)
		}
		return types.DString(rs[:min(n, int64(len(rs)))]), nil
	})
	textFn("right", []*types.T{text, i4}, text, func(a []types.Datum) (types.Datum, error) {
		rs, n := []rune(str(a[0])), i64(a[1])
		if n < 0 {
			n = max(int64(len(rs))+n, 0)
		}
		n = min(n, int64(len(rs)))
		return types.DString(rs[int64(len(rs))-n:]), nil
	})
	textFn("repeat", []*types.T{text, i4}, text, func(a []types.Datum) (types.Datum, error) {
		n := i64(a[1])
		if n <= 0 {
			return types.DString(""), nil
		}
		if int64(len(str(a[0])))*n > 1<<30 {
			return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "requested length too large")
		}
		return types.DString(strings.Repeat(str(a[0]), int(n))), nil
	})
	textFn("reverse", t1, text, func(a []types.Datum) (types.Datum, error) { return types.DString(reverse(str(a[0]))), nil })
	textFn("split_part", []*types.T{text, text, i4}, text, func(a []types.Datum) (types.Datum, error) {
		s, err := splitPart(str(a[0]), str(a[1]), i64(a[2]))
		return types.DString(s), err
	})
	textFn("starts_with", []*types.T{text, text}, b, func(a []types.Datum) (types.Datum, error) {
		return types.DBool(strings.HasPrefix(str(a[0]), str(a[1]))), nil
	})
	textFn("ascii", t1, i4, func(a []types.Datum) (types.Datum, error) {
		r, _ := utf8.DecodeRuneInString(str(a[0]))
		if str(a[0]) == "" {
			r = 0
		}
		return types.DInt(r), nil
	})
	textFn("chr", []*types.T{i4}, text, func(a []types.Datum) (types.Datum, error) {
		n := i64(a[0])
		switch {
		case n == 0:
			return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "null character not permitted")
		case n < 0 || n > unicode.MaxRune || n >= 0xD800 && n <= 0xDFFF:
			return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "requested character too large for encoding: %d", n)
		}
		return types.DString(string(rune(n))), nil
	})
	for _, t := range []*types.T{types.Int4, types.Int8} {
		textFn("to_hex", []*types.T{t}, text, func(a []types.Datum) (types.Datum, error) {
			v := i64(a[0])
			if t.Width == 32 {
				return types.DString(strconv.FormatUint(uint64(uint32(v)), 16)), nil
			}
			return types.DString(strconv.FormatUint(uint64(v), 16)), nil
		})
	}
	textFn("encode", []*types.T{types.Bytea, text}, text, func(a []types.Datum) (types.Datum, error) {
		s, err := encode([]byte(str(a[0])), str(a[1]))
		return types.DString(s), err
	})
	textFn("decode", []*types.T{text, text}, types.Bytea, func(a []types.Datum) (types.Datum, error) {
		bs, err := decode(str(a[0]), str(a[1]))
		return types.DBytes(bs), err
	})
	textFn("quote_ident", t1, text, func(a []types.Datum) (types.Datum, error) { return types.DString(QuoteIdent(str(a[0]))), nil })
	textFn("quote_literal", t1, text, func(a []types.Datum) (types.Datum, error) {
		return types.DString(QuoteLiteral(str(a[0]))), nil
	})
	registerFn("quote_nullable", Overload{Args: t1, Return: Fixed(text), Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DString("NULL"), nil
		}
		return types.DString(QuoteLiteral(str(a[0]))), nil
	}})

	// concat and concat_ws skip NULLs and print other values as text.
	registerFn("concat", Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(text), Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DString(joinText(ctx, a, "")), nil
		}})
	registerFn("concat_ws", Overload{Args: []*types.T{text, Any}, Variadic: true, Return: Fixed(text), Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if types.IsNull(a[0]) {
				return types.DNull, nil
			}
			return types.DString(joinText(ctx, a[1:], str(a[0]))), nil
		}})
	fmtFn := func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DNull, nil
		}
		s, err := formatFn(ctx, str(a[0]), textArgs(ctx, a[1:]))
		return types.DString(s), err
	}
	registerFn("format",
		Overload{Args: t1, Return: Fixed(text), Volatility: Stable, Fn: fmtFn},
		Overload{Args: []*types.T{text, Any}, Variadic: true, Return: Fixed(text), Volatility: Stable, Fn: fmtFn})

	// String operators.
	// checkConcatLen refuses a result over PostgreSQL's 1 GB value limit
	// before allocating it (PostgreSQL's palloc refuses it as well).
	checkConcatLen := func(a, b string) error {
		if n := int64(len(a)) + int64(len(b)); n > 1<<30-1 {
			return pgerror.New(pgerrcode.ProgramLimitExceeded, "invalid memory alloc request size %d", n+4)
		}
		return nil
	}
	registerBinary("||",
		Overload{Args: []*types.T{text, text}, Return: Fixed(text), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			if err := checkConcatLen(str(a[0]), str(a[1])); err != nil {
				return nil, err
			}
			return types.DString(str(a[0]) + str(a[1])), nil
		}},
		Overload{Args: []*types.T{types.Bytea, types.Bytea}, Return: Fixed(types.Bytea), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			if err := checkConcatLen(str(a[0]), str(a[1])); err != nil {
				return nil, err
			}
			return types.DBytes(str(a[0]) + str(a[1])), nil
		}},
		// textanycat and anytextcat: 'n = ' || 1.
		Overload{Args: []*types.T{text, AnyNonArray}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DString(str(a[0]) + datumText(ctx, a[1])), nil
		}},
		Overload{Args: []*types.T{AnyNonArray, text}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DString(datumText(ctx, a[0]) + str(a[1])), nil
		}},
	)
	for _, op := range []struct {
		name      string
		fold, neg bool
	}{{"~~", false, false}, {"!~~", false, true}, {"~~*", true, false}, {"!~~*", true, true}} {
		registerBinary(op.name, Overload{Args: []*types.T{text, text}, Return: Fixed(b), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				m, err := Like(str(a[0]), str(a[1]), op.fold)
				return types.DBool(m != op.neg), err
			}})
	}
	for _, op := range []struct {
		name      string
		fold, neg bool
	}{{"~", false, false}, {"!~", false, true}, {"~*", true, false}, {"!~*", true, true}} {
		registerBinary(op.name, Overload{Args: []*types.T{text, text}, Return: Fixed(b), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				re, err := compileRegex(str(a[1]), op.fold)
				if err != nil {
					return nil, err
				}
				return types.DBool(re.MatchString(str(a[0])) != op.neg), nil
			}})
	}
	textFn("like_escape", []*types.T{text, text}, text, func(a []types.Datum) (types.Datum, error) {
		// Re-express the pattern with backslash as its escape.
		if _, err := CompileLike(str(a[0]), str(a[1]), false); err != nil {
			return nil, err
		}
		return types.DString(likeToBackslash(str(a[0]), str(a[1]))), nil
	})
}

// likeToBackslash rewrites pattern from escape character esc to backslash.
func likeToBackslash(pattern, esc string) string {
	e, _ := utf8.DecodeRuneInString(esc)
	var b strings.Builder
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch {
		case esc != "" && rs[i] == e && i+1 < len(rs):
			i++
			b.WriteRune('\\')
			b.WriteRune(rs[i])
		case rs[i] == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(rs[i])
		}
	}
	return b.String()
}

// textArgs converts "any" arguments to their text output (NULL kept).
func textArgs(ctx EvalContext, a []types.Datum) []types.Datum {
	out := make([]types.Datum, len(a))
	for i, d := range a {
		if types.IsNull(d) {
			out[i] = types.DNull
			continue
		}
		out[i] = types.DString(datumText(ctx, d))
	}
	return out
}

func datumText(ctx EvalContext, d types.Datum) string {
	if s, ok := d.(types.DString); ok {
		return string(s)
	}
	return types.Format(typesCtx(ctx), datumType(d), d)
}

// datumType is the widest type of a datum's family, for printing values of
// "any" arguments.
func datumType(d types.Datum) *types.T {
	switch v := d.(type) {
	case types.DBool:
		return types.Bool
	case types.DInt:
		return types.Int8
	case types.DFloat:
		return types.Float8
	case *types.DDecimal:
		return types.Numeric
	case types.DBytes:
		return types.Bytea
	case types.DDate:
		return types.Date
	case types.DTime:
		return types.Time
	case types.DTimestamp:
		return types.Timestamp
	case types.DTimestampTZ:
		return types.TimestampTZ
	case types.DInterval:
		return types.Interval
	case types.DUUID:
		return types.UUID
	case *types.DJSON:
		return types.JSONB
	case types.DOid:
		return types.Oid
	case *types.DArray:
		return types.MustArray(v.Elem)
	}
	return types.Text
}

func joinText(ctx EvalContext, a []types.Datum, sep string) string {
	var b strings.Builder
	first := true
	for _, d := range a {
		if types.IsNull(d) {
			continue
		}
		if !first {
			b.WriteString(sep)
		}
		first = false
		b.WriteString(datumText(ctx, d))
	}
	return b.String()
}
