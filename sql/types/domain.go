package types

// Domains (CREATE DOMAIN d AS base ...). A domain's *T is its base type's
// (same Family, Oid and modifiers, so operators, encodings and the wire
// treat its values as the base's, as PostgreSQL sends a domain column as
// its base type) with Domain set: the binder wraps every conversion into
// the domain (an assignment to a column of it, a cast) in a check of its
// NOT NULL and CHECK constraints (sql/sem's DomainCoerce).

// DomainMeta describes a domain. It is immutable.
type DomainMeta struct {
	// Oid is the domain's pg_type OID (its descriptor ID).
	Oid          uint32
	Schema, Name string
	NotNull      bool
	// Default is the DEFAULT expression's stored text ("" for none): a
	// column of the domain without a default of its own takes it.
	Default string
	// Checks are the CHECK constraints, in creation order; their
	// expressions name the value VALUE.
	Checks []DomainCheck
}

// DomainCheck is one CHECK constraint of a domain.
type DomainCheck struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

// MakeDomain returns the domain m over base.
func MakeDomain(base *T, m *DomainMeta) *T {
	c := *base
	c.Domain = m
	return &c
}

// BaseType returns t without its domain (t itself when it is none).
func BaseType(t *T) *T {
	if t.Domain == nil {
		return t
	}
	c := *t
	c.Domain = nil
	return &c
}

// TypeOID is t's pg_type OID: the domain's own for a domain, which
// otherwise carries its base type's OID.
func TypeOID(t *T) uint32 {
	if t.Domain != nil {
		return t.Domain.Oid
	}
	return t.Oid
}
