package pgcatalog

import "github.com/cairn-db/cairn/sql/plan"

// PLACEHOLDER body: replaced by the catalog tables.

// Lookup returns the virtual table schema.name, nil if there is none.
func Lookup(schema, name string) plan.VirtualTable { return nil }
