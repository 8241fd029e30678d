package catalog

import (
	"context"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// TestReferencedBy checks that a parent's ReferencedBy follows its
// children's foreign keys through Create, Update and Drop.
func TestReferencedBy(t *testing.T) {
	db := newTestDB(t)
	var parentID, childID ID
	refs := func(ctx context.Context, txn *kv.Txn) []ID {
		p, err := NewReader(txn, nil).TableByID(ctx, parentID)
		if err != nil {
			t.Fatal(err)
		}
		return p.ReferencedBy
	}
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		p := simpleTable("p")
		if err := w.Create(ctx, p); err != nil {
			return err
		}
		parentID = p.ID
		c := simpleTable("c")
		fk := ForeignKey{Name: "c_c_fkey", ColumnIDs: []rowenc.ColumnID{3}, ReferencedTableID: p.ID, ReferencedColumnIDs: []rowenc.ColumnID{1}}
		// Two keys to one parent and one to itself: the parent lists the
		// child once, the child does not list itself.
		c.ForeignKeys = []ForeignKey{fk, fk}
		c.ForeignKeys[1].Name = "c_c_fkey1"
		if err := w.Create(ctx, c); err != nil {
			return err
		}
		childID = c.ID
		self := c.ForeignKeys[0]
		self.Name, self.ReferencedTableID = "c_self", c.ID
		cc, _ := Clone(c)
		cc.ForeignKeys = append(cc.ForeignKeys, self)
		if err := w.Update(ctx, cc); err != nil {
			return err
		}
		if got := refs(ctx, txn); !slices.Equal(got, []ID{childID}) {
			t.Errorf("after create: parent ReferencedBy = %v, want [%d]", got, childID)
		}
		if cc.ReferencedBy != nil {
			t.Errorf("self reference recorded: %v", cc.ReferencedBy)
		}
		return nil
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		c, err := w.TableByID(ctx, childID)
		if err != nil {
			return err
		}
		cc, _ := Clone(c)
		cc.ForeignKeys = cc.ForeignKeys[:1]
		if err := w.Update(ctx, cc); err != nil {
			return err
		}
		if got := refs(ctx, txn); !slices.Equal(got, []ID{childID}) {
			t.Errorf("after dropping one of two keys: %v", got)
		}
		cc2, _ := Clone(cc)
		cc2.ForeignKeys = nil
		if err := w.Update(ctx, cc2); err != nil {
			return err
		}
		if got := refs(ctx, txn); len(got) != 0 {
			t.Errorf("after dropping every key: %v", got)
		}
		cc3, _ := Clone(cc2)
		cc3.ForeignKeys = cc.ForeignKeys
		if err := w.Update(ctx, cc3); err != nil {
			return err
		}
		if got := refs(ctx, txn); !slices.Equal(got, []ID{childID}) {
			t.Errorf("after adding a key back: %v", got)
		}
		if err := w.Drop(ctx, cc3); err != nil {
			return err
		}
		if got := refs(ctx, txn); len(got) != 0 {
			t.Errorf("after dropping the child: %v", got)
		}
		return nil
	})
}
