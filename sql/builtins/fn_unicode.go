package builtins

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"golang.org/x/text/unicode/norm"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Unicode normalization (normalize, IS [NOT] form NORMALIZED) and
// unistr's escapes, for Cairn's UTF8 server encoding.

func normForm(name string) (norm.Form, error) {
	switch strings.ToUpper(name) {
	case "NFC":
		return norm.NFC, nil
	case "NFD":
		return norm.NFD, nil
	case "NFKC":
		return norm.NFKC, nil
	case "NFKD":
		return norm.NFKD, nil
	}
	return 0, errInvalidParam("invalid normalization form: %s", name)
}

// unistr decodes \XXXX, \+XXXXXX, \uXXXX, \UXXXXXXXX and \\ as
// Postgres's unistr does.
func unistr(s string) (string, error) {
	bad := func() error {
		return pgerror.New(pgerrcode.SyntaxError, "invalid Unicode escape").
			WithHint("Unicode escapes must be \\XXXX, \\+XXXXXX, \\uXXXX, or \\UXXXXXXXX.")
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			i++
			continue
		}
		rest := s[i+1:]
		n, skip := 0, 0
		switch {
		case strings.HasPrefix(rest, "\\"):
			b.WriteByte('\\')
			i += 2
			continue
		case strings.HasPrefix(rest, "+"):
			n, skip = 6, 2
		case strings.HasPrefix(rest, "u"):
			n, skip = 4, 2
		case strings.HasPrefix(rest, "U"):
			n, skip = 8, 2
		default:
			n, skip = 4, 1
		}
		if len(s) < i+skip+n {
			return "", bad()
		}
		v, err := strconv.ParseUint(s[i+skip:i+skip+n], 16, 32)
		if err != nil {
			return "", bad()
		}
		r := rune(v)
		if r == 0 || !utf8.ValidRune(r) {
			return "", errInvalidParam("invalid Unicode code point: %04X", v)
		}
		b.WriteRune(r)
		i += skip + n
	}
	return b.String(), nil
}

func init() {
	text := types.Text
	normFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		f := norm.NFC
		if len(a) > 1 {
			var err error
			if f, err = normForm(str(a[1])); err != nil {
				return nil, err
			}
		}
		return types.DString(f.String(str(a[0]))), nil
	}
	isNormFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		f := norm.NFC
		if len(a) > 1 {
			var err error
			if f, err = normForm(str(a[1])); err != nil {
				return nil, err
			}
		}
		return types.DBool(f.IsNormalString(str(a[0]))), nil
	}
	registerFn("normalize",
		Overload{Args: []*types.T{text}, Return: Fixed(text), Strict: true, Fn: normFn},
		Overload{Args: []*types.T{text, text}, Return: Fixed(text), Strict: true, Fn: normFn})
	registerFn("is_normalized",
		Overload{Args: []*types.T{text}, Return: Fixed(types.Bool), Strict: true, Fn: isNormFn},
		Overload{Args: []*types.T{text, text}, Return: Fixed(types.Bool), Strict: true, Fn: isNormFn})
	registerFn("unistr", Overload{Args: []*types.T{text}, Return: Fixed(text), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			s, err := unistr(str(a[0]))
			return types.DString(s), err
		}})
}
