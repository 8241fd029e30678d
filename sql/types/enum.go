package types

import (
	"bytes"
	"math"
	"unicode/utf8"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// Enum types (CREATE TYPE ... AS ENUM). A *T of EnumFamily carries its
// members in T.Enum; T.Oid is the type's own OID.
//
// Every member has a physical representation (PhysRep): a byte string that
// orders members by bytes.Compare and never changes once assigned. Key and
// value encodings store PhysRep, never the label, so RENAME VALUE rewrites
// nothing on disk, and ADD VALUE BEFORE/AFTER picks a representation strictly
// between its neighbours (there is always room between two byte strings),
// so keys already stored stay in declaration order. SortOrder is only what
// pg_enum.enumsortorder shows, computed the way PostgreSQL 15 does.

// EnumMember is one label of an enum type.
type EnumMember struct {
	Label string
	// PhysRep orders the member among its siblings; it never ends in 0x00.
	PhysRep []byte
	// SortOrder is pg_enum.enumsortorder (float4 in PostgreSQL).
	SortOrder float32
}

// EnumMeta describes an enum type. It is immutable: AddValue and
// RenameValue return a new EnumMeta.
type EnumMeta struct {
	Schema, Name string
	// ArrayOid is the OID of the type's array type (_name).
	ArrayOid uint32
	// Members in declaration order (ascending PhysRep).
	Members []EnumMember
}

// DEnum is a value of an enum type: the member's physical representation
// (what compares and what is stored) and its label (what prints).
type DEnum struct {
	PhysRep string
	Label   string
}

// Family implements Datum.
func (DEnum) Family() Family { return EnumFamily }

// String implements Datum: the label, as PostgreSQL prints enum values.
func (d DEnum) String() string { return d.Label }

// maxEnumLabelLen is NAMEDATALEN-1, PostgreSQL's limit on a label's bytes.
const maxEnumLabelLen = 63

func checkEnumLabel(label string) error {
	// PostgreSQL accepts the empty label; only the length is checked.
	if len(label) > maxEnumLabelLen {
		return pgerror.New(pgerrcode.InvalidName, "invalid enum label \"%s\"", label).
			WithDetail("Labels must be %d bytes or less.", maxEnumLabelLen)
	}
	return nil
}

// MakeEnum builds an enum type with the given OIDs, name and labels in
// declaration order. Errors are PostgreSQL's for bad and duplicate labels.
func MakeEnum(oid, arrayOid uint32, schema, name string, labels []string) (*T, error) {
	n := len(labels)
	// Spread the initial representations evenly over base-255 digits so
	// later insertions between neighbours stay short.
	digits, space := 1, 255
	for space <= n {
		digits++
		space *= 255
		if digits > 4 {
			return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "too many enum labels")
		}
	}
	m := &EnumMeta{Schema: schema, Name: name, ArrayOid: arrayOid, Members: make([]EnumMember, n)}
	seen := make(map[string]bool, n)
	for i, l := range labels {
		if err := checkEnumLabel(l); err != nil {
			return nil, err
		}
		if !utf8.ValidString(l) {
			return nil, errInvalidUTF8(l)
		}
		if seen[l] {
			return nil, pgerror.New(pgerrcode.UniqueViolation,
				"duplicate key value violates unique constraint \"pg_enum_typid_label_index\"").
				WithDetail("Key (enumtypid, enumlabel)=(%d, %s) already exists.", oid, l)
		}
		seen[l] = true
		v := (i + 1) * space / (n + 1) // in [1, space), strictly increasing
		rep := make([]byte, digits)
		for d := digits - 1; d >= 0; d-- {
			rep[d] = byte(v%255) + 1 // digits 1..255: never a trailing 0x00
			v /= 255
		}
		m.Members[i] = EnumMember{Label: l, PhysRep: rep, SortOrder: float32(i + 1)}
	}
	return &T{Family: EnumFamily, Oid: oid, Enum: m}, nil
}

// WithEnum returns a copy of enum type t with metadata m (after ALTER TYPE).
func (t *T) WithEnum(m *EnumMeta) *T {
	c := *t
	c.Enum = m
	return &c
}

func (m *EnumMeta) index(label string) int {
	for i := range m.Members {
		if m.Members[i].Label == label {
			return i
		}
	}
	return -1
}

func errNotEnumLabel(label string) error {
	return pgerror.New(pgerrcode.InvalidParameterValue, "\"%s\" is not an existing enum label", label)
}

// errEnumLabelExists is AddValue's and RenameValue's error (42710) when
// the label is taken; ADD VALUE IF NOT EXISTS turns it into a notice
// "enum label "x" already exists, skipping".
func errEnumLabelExists(label string) error {
	return pgerror.New(pgerrcode.DuplicateObject, "enum label \"%s\" already exists", label)
}

// AddValue returns m with label added: last when neighbour is "", else
// right before or after neighbour. exists reports that the label was
// already there; ifNotExists makes that no error (m is returned as is).
func (m *EnumMeta) AddValue(label, neighbour string, before, ifNotExists bool) (out *EnumMeta, exists bool, err error) {
	if err := checkEnumLabel(label); err != nil {
		return nil, false, err
	}
	if m.index(label) >= 0 {
		if ifNotExists {
			return m, true, nil
		}
		return nil, true, errEnumLabelExists(label)
	}
	pos := len(m.Members) // insert at pos
	if neighbour != "" {
		i := m.index(neighbour)
		if i < 0 {
			return nil, false, errNotEnumLabel(neighbour)
		}
		pos = i
		if !before {
			pos = i + 1
		}
	}
	var lo, hi []byte
	if pos > 0 {
		lo = m.Members[pos-1].PhysRep
	}
	if pos < len(m.Members) {
		hi = m.Members[pos].PhysRep
	}
	nm := &EnumMeta{Schema: m.Schema, Name: m.Name, ArrayOid: m.ArrayOid,
		Members: make([]EnumMember, 0, len(m.Members)+1)}
	nm.Members = append(nm.Members, m.Members[:pos]...)
	nm.Members = append(nm.Members, EnumMember{Label: label, PhysRep: enumRepBetween(lo, hi)})
	nm.Members = append(nm.Members, m.Members[pos:]...)
	nm.assignSortOrder(pos, neighbour == "", before)
	return nm, false, nil
}

// assignSortOrder gives the member at pos its pg_enum.enumsortorder as
// PostgreSQL's AddEnumLabel does: max+1 at the end, neighbour-1 before the
// first, else the midpoint; when float4 has no room left it renumbers
// the whole type 1..n (PostgreSQL's RenumberEnumType).
func (m *EnumMeta) assignSortOrder(pos int, atEnd, before bool) {
	ms := m.Members
	switch {
	case len(ms) == 1:
		ms[pos].SortOrder = 1
		return
	case atEnd:
		ms[pos].SortOrder = ms[pos-1].SortOrder + 1
		return
	case pos == 0:
		ms[pos].SortOrder = ms[1].SortOrder - 1
		return
	case pos == len(ms)-1:
		ms[pos].SortOrder = ms[pos-1].SortOrder + 1
		return
	}
	lo, hi := ms[pos-1].SortOrder, ms[pos+1].SortOrder
	mid := float32((float64(lo) + float64(hi)) / 2)
	if mid > lo && mid < hi && !math.IsInf(float64(mid), 0) {
		ms[pos].SortOrder = mid
		return
	}
	for i := range ms {
		ms[i].SortOrder = float32(i + 1)
	}
}

// RenameValue returns m with label from renamed to to.
func (m *EnumMeta) RenameValue(from, to string) (*EnumMeta, error) {
	// PostgreSQL's RenameEnumLabel checks the new label's length first.
	if err := checkEnumLabel(to); err != nil {
		return nil, err
	}
	i := m.index(from)
	if i < 0 {
		return nil, errNotEnumLabel(from)
	}
	if m.index(to) >= 0 {
		return nil, errEnumLabelExists(to)
	}
	nm := *m
	nm.Members = append([]EnumMember(nil), m.Members...)
	nm.Members[i].Label = to
	return &nm, nil
}

// enumRepBetween returns the shortest-ish byte string strictly between lo
// and hi (nil lo: no lower bound, nil hi: no upper bound), never ending in
// 0x00 so that something always fits below it too. lo < hi is required.
func enumRepBetween(lo, hi []byte) []byte {
	var out []byte
	hiTight := hi != nil
	for i := 0; ; i++ {
		l := 0
		if i < len(lo) {
			l = int(lo[i])
		}
		h := 256
		if hiTight {
			h = int(hi[i])
		}
		if h-l >= 2 {
			return append(out, byte((l+h)/2))
		}
		out = append(out, byte(l))
		if l < h {
			hiTight = false
		}
	}
}

// ParseEnum returns the member of enum type t labelled s, or PostgreSQL's
// 22P02 error.
func ParseEnum(t *T, s string) (Datum, error) {
	if i := t.Enum.index(s); i >= 0 {
		mb := &t.Enum.Members[i]
		return DEnum{PhysRep: string(mb.PhysRep), Label: mb.Label}, nil
	}
	return nil, pgerror.New(pgerrcode.InvalidTextRepresentation,
		"invalid input value for enum %s: \"%s\"", t.Enum.Name, s)
}

// EnumFromPhysRep returns the member of t stored as rep (the key and value
// decoders use it). A representation t does not know means the member was
// dropped or the descriptor is stale: an internal error.
func EnumFromPhysRep(t *T, rep []byte) (DEnum, error) {
	ms := t.Enum.Members
	lo, hi := 0, len(ms)
	for lo < hi {
		mid := (lo + hi) / 2
		switch c := bytes.Compare(ms[mid].PhysRep, rep); {
		case c == 0:
			return DEnum{PhysRep: string(ms[mid].PhysRep), Label: ms[mid].Label}, nil
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return DEnum{}, pgerror.New(pgerrcode.InternalError,
		"invalid internal value for enum %s: %x", t.Enum.Name, rep)
}

// EnumMemberDatum returns member i of t as a datum (enum_first, enum_range).
func EnumMemberDatum(t *T, i int) DEnum {
	mb := &t.Enum.Members[i]
	return DEnum{PhysRep: string(mb.PhysRep), Label: mb.Label}
}
