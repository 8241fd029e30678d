package exec

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Foreign keys, as PostgreSQL's RI triggers enforce them (MATCH SIMPLE: a
// key with any NULL column references nothing):
//
//   - a child row inserted, or updated with a changed key, must find its
//     key in the parent's referenced unique index (23503 "insert or
//     update on table ...");
//   - a parent row deleted, or updated with a changed referenced key,
//     applies the key's ON DELETE / ON UPDATE action to the child rows
//     referencing the old key: NO ACTION and RESTRICT fail with 23503
//     "update or delete on table ..." if any exist (NO ACTION only if no
//     row holds the old key again by the end of the statement), CASCADE
//     deletes them or copies the new key into them, SET NULL and SET
//     DEFAULT update their key columns.
//
// Both run after the statement's own rows are written (deferred to the end
// of the statement, as Postgres's AFTER triggers are), so one statement may
// insert rows that reference each other. The actions' own writes go
// through the same machinery, so they cascade further and check the
// child's constraints.

// fkInfo is one foreign key with both tables resolved.
type fkInfo struct {
	fk        *catalog.ForeignKey
	child     *tableInfo
	parentID  catalog.ID
	parent    *tableInfo // resolved on first use
	childPos  []int
	parentPos []int
}

// childCheck is a child key to look up in the parent at the end of the
// statement.
type childCheck struct {
	fk  *fkInfo
	key []types.Datum // in fk column order
}

// parentEvent is a parent row deleted (new nil) or updated with a changed
// referenced key, for every foreign key referencing that key.
type parentEvent struct {
	fk       *fkInfo
	old, new []types.Datum // parent rows
}

func (s *dmlState) newFK(child *tableInfo, fk *catalog.ForeignKey) (*fkInfo, error) {
	f := &fkInfo{fk: fk, child: child, parentID: fk.ReferencedTableID}
	for _, id := range fk.ColumnIDs {
		p, ok := child.colPos(id)
		if !ok {
			return nil, fmt.Errorf("foreign key %q: column %d not in table %q", fk.Name, id, child.desc.Name)
		}
		f.childPos = append(f.childPos, p)
	}
	return f, nil
}

// resolveParent loads the referenced table.
func (s *dmlState) resolveParent(ctx context.Context, f *fkInfo) error {
	if f.parent != nil {
		return nil
	}
	var p *tableInfo
	if f.parentID == f.child.desc.ID {
		p = f.child
	} else {
		var err error
		if p, err = s.tableByID(ctx, f.parentID); err != nil {
			return fmt.Errorf("foreign key %q: %w", f.fk.Name, err)
		}
	}
	f.parentPos = f.parentPos[:0]
	for _, id := range f.fk.ReferencedColumnIDs {
		pp, ok := p.colPos(id)
		if !ok {
			return fmt.Errorf("foreign key %q: referenced column %d not in table %q", f.fk.Name, id, p.desc.Name)
		}
		f.parentPos = append(f.parentPos, pp)
	}
	f.parent = p
	return nil
}

// referencing loads the foreign keys of other tables (and of ti itself)
// that reference ti, from ti.desc.ReferencedBy.
func (s *dmlState) referencing(ctx context.Context, ti *tableInfo) ([]*fkInfo, error) {
	if ti.inDone {
		return ti.in, nil
	}
	ids := append([]catalog.ID{ti.desc.ID}, ti.desc.ReferencedBy...)
	seen := map[catalog.ID]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		child, err := s.tableByID(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, f := range child.out {
			if f.parentID == ti.desc.ID {
				if err := s.resolveParent(ctx, f); err != nil {
					return nil, err
				}
				ti.in = append(ti.in, f)
			}
		}
	}
	ti.inDone = true
	return ti.in, nil
}

// keyOf returns row's values at pos, or nil if any is NULL (MATCH SIMPLE).
func keyOf(row []types.Datum, pos []int) []types.Datum {
	k := make([]types.Datum, len(pos))
	for i, p := range pos {
		if types.IsNull(row[p]) {
			return nil
		}
		k[i] = row[p]
	}
	return k
}

// keyChanged reports whether the columns at pos differ between old and
// new (NULL and NULL are the same).
func keyChanged(old, new []types.Datum, pos []int) bool {
	for _, p := range pos {
		on, nn := types.IsNull(old[p]), types.IsNull(new[p])
		if on != nn || (!on && types.Compare(old[p], new[p]) != 0) {
			return true
		}
	}
	return false
}

// noteWrite records the foreign-key work a row change implies: checks of
// the new row's keys (as child) and events for the old row's referenced
// keys (as parent).
func (s *dmlState) noteWrite(ctx context.Context, ti *tableInfo, old, new []types.Datum) error {
	if new != nil {
		for _, f := range ti.out {
			if old != nil && !keyChanged(old, new, f.childPos) {
				continue
			}
			if k := keyOf(new, f.childPos); k != nil {
				s.childChecks = append(s.childChecks, childCheck{fk: f, key: k})
			}
		}
	}
	if old == nil {
		return nil
	}
	in, err := s.referencing(ctx, ti)
	if err != nil {
		return err
	}
	for _, f := range in {
		if new != nil && !keyChanged(old, new, f.parentPos) {
			continue
		}
		if keyOf(old, f.parentPos) == nil {
			continue
		}
		s.parentEvents = append(s.parentEvents, parentEvent{fk: f, old: old, new: new})
	}
	return nil
}

// finishFKs runs the statement's deferred foreign-key work until none is
// left (actions may cause more).
func (s *dmlState) finishFKs(ctx context.Context) error {
	for len(s.childChecks) > 0 || len(s.parentEvents) > 0 {
		if err := s.flush(ctx); err != nil {
			return err
		}
		if len(s.parentEvents) > 0 {
			events := s.parentEvents
			s.parentEvents = nil
			if err := s.runParentEvents(ctx, events); err != nil {
				return err
			}
			continue
		}
		checks := s.childChecks
		s.childChecks = nil
		for i := 0; i < len(checks); i += lookupChunk {
			if err := s.runChildChecks(ctx, checks[i:min(i+lookupChunk, len(checks))]); err != nil {
				return err
			}
		}
	}
	return s.flush(ctx)
}

// parentRowFor builds a row of the parent holding key at the referenced
// columns (others NULL), each value cast to the parent column's type.
func (f *fkInfo) parentRowFor(x *Context, key []types.Datum) ([]types.Datum, error) {
	row := make([]types.Datum, len(f.parent.desc.Columns))
	for i := range row {
		row[i] = types.DNull
	}
	for i, p := range f.parentPos {
		ct := f.child.desc.Columns[f.childPos[i]].Type
		pt := f.parent.desc.Columns[p].Type
		d := key[i]
		if ct.Family != pt.Family {
			var err error
			if d, err = types.Cast(typesCtx(x), d, ct, pt); err != nil {
				return nil, err
			}
		}
		row[p] = d
	}
	return row, nil
}

// parentIndex is the unique index of the parent over exactly the
// referenced columns, usable for a point lookup.
func (f *fkInfo) parentIndex() *rowenc.IndexLayout {
	l := f.parent.layout
	match := func(idx *rowenc.IndexLayout) bool {
		if len(idx.KeyColumns) != len(f.parentPos) {
			return false
		}
		for _, c := range idx.KeyColumns {
			if indexOf(f.parentPos, l.ColumnPos(c)) < 0 {
				return false
			}
		}
		return true
	}
	if match(&l.Primary) {
		return &l.Primary
	}
	for i := range l.Secondary {
		idx := &l.Secondary[i]
		d := f.parent.desc.IndexByID(catalog.IndexID(idx.ID))
		if !idx.Unique || d == nil || d.State != catalog.IndexPublic || d.Predicate != "" {
			continue
		}
		if idx.Local && l.HashColumns > 0 {
			continue
		}
		if match(idx) {
			return idx
		}
	}
	return nil
}

// runChildChecks looks every child key up in its parent: point reads of
// the referenced unique index in one batch where there is one.
func (s *dmlState) runChildChecks(ctx context.Context, checks []childCheck) error {
	type pending struct {
		c   childCheck
		row []types.Datum
	}
	var point, scanned []pending
	b := &kv.Batch{}
	seen := map[string]bool{}
	for _, c := range checks {
		if err := s.resolveParent(ctx, c.fk); err != nil {
			return err
		}
		row, err := c.fk.parentRowFor(s.x, c.key)
		if err != nil {
			return err
		}
		idx := c.fk.parentIndex()
		if idx == nil {
			scanned = append(scanned, pending{c: c, row: row})
			continue
		}
		var key []byte
		if idx == &c.fk.parent.layout.Primary {
			key, err = c.fk.parent.primaryKey(row)
		} else {
			var e rowenc.IndexEntry
			e, err = c.fk.parent.layout.EncodeIndexEntry(idx, row)
			key = e.Key
		}
		if err != nil {
			return err
		}
		if seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		b.Get(key)
		point = append(point, pending{c: c, row: row})
	}
	// Parents without a usable unique index (none should lack one: a
	// foreign key needs it) are matched by a scan per foreign key.
	for len(scanned) > 0 {
		f := scanned[0].c.fk
		var keys [][]types.Datum
		var rest, these []pending
		for _, p := range scanned {
			if p.c.fk == f {
				these = append(these, p)
				keys = append(keys, parentKey(p.row, f.parentPos))
			} else {
				rest = append(rest, p)
			}
		}
		found, err := s.findRowsMulti(ctx, f.parent, f.parentPos, keys)
		if err != nil {
			return err
		}
		for i := range found {
			if len(found[i]) == 0 {
				return f.childViolation(s.x, these[i].c.key)
			}
		}
		scanned = rest
	}
	if len(point) == 0 {
		return nil
	}
	if err := s.x.Txn.Run(ctx, b); err != nil {
		return err
	}
	for i, p := range point {
		if !b.Results[i].Found {
			return p.c.fk.childViolation(s.x, p.c.key)
		}
	}
	return nil
}

func parentKey(row []types.Datum, pos []int) []types.Datum {
	k := make([]types.Datum, len(pos))
	for i, p := range pos {
		k[i] = row[p]
	}
	return k
}

// keyDetail formats "Key (a, b)=(1, 2)" for columns pos of table t.
func keyDetail(x *Context, t *catalog.Table, pos []int, vals []types.Datum) string {
	var names, values strings.Builder
	for i, p := range pos {
		if i > 0 {
			names.WriteString(", ")
			values.WriteString(", ")
		}
		names.WriteString(t.Columns[p].Name)
		if types.IsNull(vals[i]) {
			values.WriteString("null")
		} else {
			values.WriteString(types.Format(typesCtx(x), t.Columns[p].Type, vals[i]))
		}
	}
	return fmt.Sprintf("Key (%s)=(%s)", names.String(), values.String())
}

func (f *fkInfo) childViolation(x *Context, key []types.Datum) error {
	return pgerror.New(pgerrcode.ForeignKeyViolation,
		"insert or update on table %q violates foreign key constraint %q", f.child.desc.Name, f.fk.Name).
		WithDetail("%s is not present in table %q.", keyDetail(x, f.child.desc, f.childPos, key), f.parent.desc.Name).
		WithTable(f.child.schemaName(x), f.child.desc.Name).WithConstraint(f.fk.Name)
}

func (f *fkInfo) parentViolation(x *Context, key []types.Datum) error {
	return pgerror.New(pgerrcode.ForeignKeyViolation,
		"update or delete on table %q violates foreign key constraint %q on table %q",
		f.parent.desc.Name, f.fk.Name, f.child.desc.Name).
		WithDetail("%s is still referenced from table %q.", keyDetail(x, f.parent.desc, f.parentPos, key), f.child.desc.Name).
		WithTable(f.child.schemaName(x), f.child.desc.Name).WithConstraint(f.fk.Name)
}

// childKey casts a parent key to the child columns' types.
func (f *fkInfo) childKey(x *Context, parentRow []types.Datum) ([]types.Datum, error) {
	k := make([]types.Datum, len(f.childPos))
	for i, cp := range f.childPos {
		pt := f.parent.desc.Columns[f.parentPos[i]].Type
		ct := f.child.desc.Columns[cp].Type
		d := parentRow[f.parentPos[i]]
		if pt.Family != ct.Family && !types.IsNull(d) {
			var err error
			if d, err = types.Cast(typesCtx(x), d, pt, ct); err != nil {
				return nil, err
			}
		}
		k[i] = d
	}
	return k, nil
}

// runParentEvents applies each event's referential action to the child
// rows referencing the old key. Events are handled per foreign key and
// kind (delete or update), in the order they first occur, with the
// lookups of a group batched.
func (s *dmlState) runParentEvents(ctx context.Context, events []parentEvent) error {
	type group struct {
		fk     *fkInfo
		update bool
		events []parentEvent
	}
	var groups []*group
	for _, ev := range events {
		var g *group
		for _, h := range groups {
			if h.fk == ev.fk && h.update == (ev.new != nil) {
				g = h
				break
			}
		}
		if g == nil {
			g = &group{fk: ev.fk, update: ev.new != nil}
			groups = append(groups, g)
		}
		g.events = append(g.events, ev)
	}
	for _, g := range groups {
		if err := s.runParentGroup(ctx, g.fk, g.update, g.events); err != nil {
			return err
		}
		// The next group may read what this one wrote.
		if err := s.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *dmlState) runParentGroup(ctx context.Context, f *fkInfo, update bool, events []parentEvent) error {
	action := f.fk.OnDelete
	if update {
		action = f.fk.OnUpdate
	}
	oldKeys := make([][]types.Datum, len(events))
	for i, ev := range events {
		oldKeys[i] = parentKey(ev.old, f.parentPos)
	}
	live := make([]bool, len(events))
	for i := range live {
		live[i] = true
	}
	if action == catalog.NoAction {
		// NO ACTION passes if a row holds the old key again by the end of
		// the statement (an UPDATE that moved keys around).
		still, err := s.findRowsMulti(ctx, f.parent, f.parentPos, oldKeys)
		if err != nil {
			return err
		}
		for i := range still {
			live[i] = len(still[i]) == 0
		}
	}
	var idx []int
	var childKeys [][]types.Datum
	for i, ev := range events {
		if !live[i] {
			continue
		}
		ck, err := f.childKey(s.x, ev.old)
		if err != nil {
			return err
		}
		idx = append(idx, i)
		childKeys = append(childKeys, ck)
	}
	found, err := s.findRowsMulti(ctx, f.child, f.childPos, childKeys)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for j, children := range found {
		if len(children) == 0 {
			continue
		}
		ev := events[idx[j]]
		switch action {
		case catalog.NoAction, catalog.Restrict:
			return f.parentViolation(s.x, oldKeys[idx[j]])
		}
		var set func(row []types.Datum) error
		switch action {
		case catalog.Cascade:
			if ev.new == nil {
				for _, c := range children {
					k, err := f.child.primaryKey(c)
					if err != nil {
						return err
					}
					if seen[string(k)] {
						continue
					}
					seen[string(k)] = true
					if err := s.write(ctx, f.child, c, nil); err != nil {
						return err
					}
					if err := s.noteWrite(ctx, f.child, c, nil); err != nil {
						return err
					}
				}
				continue
			}
			nk, err := f.childKey(s.x, ev.new)
			if err != nil {
				return err
			}
			set = func(row []types.Datum) error {
				for i, p := range f.childPos {
					row[p] = nk[i]
				}
				return nil
			}
		case catalog.SetNull:
			set = func(row []types.Datum) error {
				for _, p := range f.childPos {
					row[p] = types.DNull
				}
				return nil
			}
		case catalog.SetDefault:
			set = func(row []types.Datum) error {
				for _, p := range f.childPos {
					row[p] = types.DNull
					ev, err := f.child.defaultEval(p)
					if err != nil {
						return err
					}
					if ev != nil {
						d, err := ev(s.ev, nil)
						if err != nil {
							return err
						}
						row[p] = d
					}
				}
				return nil
			}
		default:
			return pgerror.New(pgerrcode.FeatureNotSupported, "referential action %q is not supported", action)
		}
		if err := s.updateChildren(ctx, f, children, seen, set); err != nil {
			return err
		}
	}
	return nil
}

// updateChildren rewrites child rows with set applied, checking the
// child's constraints and noting further foreign-key work.
func (s *dmlState) updateChildren(ctx context.Context, f *fkInfo, children [][]types.Datum, seen map[string]bool, set func(row []types.Datum) error) error {
	for _, old := range children {
		k, err := f.child.primaryKey(old)
		if err != nil {
			return err
		}
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		nr := append([]types.Datum(nil), old...)
		if err := set(nr); err != nil {
			return err
		}
		if err := f.child.applyText(s, nr); err != nil {
			return err
		}
		if err := s.write(ctx, f.child, old, nr); err != nil {
			return err
		}
		if err := s.noteWrite(ctx, f.child, old, nr); err != nil {
			return err
		}
	}
	return nil
}
