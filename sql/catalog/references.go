package catalog

import (
	"context"
	"fmt"
	"slices"
)

// referencedTables lists the distinct tables other than t that t's
// foreign keys reference.
func referencedTables(t *Table) []ID {
	if t == nil {
		return nil
	}
	var ids []ID
	for _, fk := range t.ForeignKeys {
		if fk.ReferencedTableID != t.ID && !slices.Contains(ids, fk.ReferencedTableID) {
			ids = append(ids, fk.ReferencedTableID)
		}
	}
	return ids
}

// syncReferencedBy keeps Table.ReferencedBy of the tables t references in
// step with t's foreign keys: before are the references of the stored
// version of t (nil when creating it), after those of the version being
// written (nil when dropping it). A table that no longer exists is
// skipped when a reference is removed.
func (w *Writer) syncReferencedBy(ctx context.Context, t *Table, before, after []ID) error {
	for _, id := range after {
		if slices.Contains(before, id) {
			continue
		}
		if err := w.editReferencedBy(ctx, id, t.ID, true); err != nil {
			return fmt.Errorf("foreign key of table %q: %w", t.Name, err)
		}
	}
	for _, id := range before {
		if slices.Contains(after, id) {
			continue
		}
		if err := w.editReferencedBy(ctx, id, t.ID, false); err != nil {
			return fmt.Errorf("foreign key of table %q: %w", t.Name, err)
		}
	}
	return nil
}

func (w *Writer) editReferencedBy(ctx context.Context, parentID, childID ID, add bool) error {
	d, ok, err := readDescriptor(ctx, w.txn, parentID)
	if err != nil {
		return err
	}
	p, isTable := d.(*Table)
	if !ok || !isTable {
		if add {
			return undefinedObject(fmt.Sprintf("table %d", parentID))
		}
		return nil
	}
	has := slices.Contains(p.ReferencedBy, childID)
	if has == add {
		return nil
	}
	if add {
		p.ReferencedBy = append(p.ReferencedBy, childID)
	} else {
		p.ReferencedBy = slices.DeleteFunc(p.ReferencedBy, func(id ID) bool { return id == childID })
	}
	return w.Update(ctx, p)
}
