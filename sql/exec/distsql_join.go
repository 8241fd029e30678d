package exec

// Distributed joins (issue 17): an inner equi-join whose inputs
// fragments can read runs inside fragments in one of three ways, chosen
// by a cost model over the optimizer's row estimates (plan.Join's
// LeftRows, RightRows, Rows):
//
//	colocated    both inputs are whole scans of hash-partitioned
//	             (distributed) tables joined on their distribution
//	             columns, with the same shard layout (each left tablet's
//	             bucket range is exactly one right tablet): one fragment
//	             per left tablet reads that tablet and the right table's
//	             tablet of the same buckets and joins them; no row moves
//	             between fragments.
//	broadcast    one input is small: the gateway computes it (any plan),
//	             ships its rows inside every fragment's Spec, and each
//	             fragment of the other input (a chain over one tablet)
//	             joins its tablet with them.
//	repartition  both inputs are chains: one consumer fragment per node
//	             the inputs' tablets are on; consumer p starts, through
//	             its own node's gateway, a flow over every tablet of each
//	             input whose fragments keep only the rows whose join key
//	             hashes to p (hash repartitioning over the Flow streams,
//	             with their flow control), and joins the two.
//
// Fragments ship the joined rows (left columns, then right ones); the
// gateway applies the whole join condition (On) to them again, so a
// condition beyond the hashed equalities, or one that could not ship,
// still holds. Rows with a NULL key never leave a repartitioning
// fragment (they match nothing in an inner join).
//
// Cost model, in rows handled (L, R: the inputs' estimates, J the
// join's, N the nodes, F the fragments of the broadcast-to input):
//
//	gateway (local)  (L+R) shipped + (L+R) joined at the gateway
//	colocated        J shipped + (L+R)/N joined in parallel
//	repartition      (L+R) + J shipped + (L+R)/N joined in parallel
//	broadcast of S   S·(F+1) + J shipped + (B + S·F)/N joined
//
// distsql = on takes the cheapest distributed way; auto takes it only
// when it is cheaper than the gateway's join.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// The ways a join distributes (fragJoin.Mode).
const (
	joinColocated   = "colocated"
	joinBroadcast   = "broadcast"
	joinRepartition = "repartition"
	joinReference   = "reference"
)

// maxBroadcastBytes bounds the encoded rows the gateway puts in every
// fragment's Spec; a small input that turns out larger than its
// estimate is joined at the gateway instead.
const maxBroadcastBytes = 8 << 20

// fragJoin is a fragment's join (fragProc.Join). The fragment's own
// fragProc is the input read from its tablet (colocated, broadcast) or
// empty (a repartition consumer).
type fragJoin struct {
	Mode string `json:"mode"`
	// LeftEq and RightEq are the key positions among each input's
	// outputs.
	LeftEq  []int `json:"left_eq"`
	RightEq []int `json:"right_eq"`
	// Right (colocated, reference) is the other table's chain, read over
	// RightSpan; with RefLeft it is the join's left input (a reference
	// table on the left).
	Right     *fragProc  `json:"right,omitempty"`
	RightSpan *kvpb.Span `json:"right_span,omitempty"`
	RefLeft   bool       `json:"ref_left,omitempty"`
	// Rows (broadcast) are the small input's rows (rowcontainer.EncodeRow);
	// SmallLeft: they are the join's left input, the tablet's the right.
	Rows      [][]byte `json:"rows,omitempty"`
	SmallLeft bool     `json:"small_left,omitempty"`
	// Repartition: the two inputs' chains and their tablets; this
	// consumer is Partition of Partitions.
	LeftProc   json.RawMessage `json:"left_proc,omitempty"`
	RightProc  json.RawMessage `json:"right_proc,omitempty"`
	LeftFrags  []fragPlace     `json:"left_frags,omitempty"`
	RightFrags []fragPlace     `json:"right_frags,omitempty"`
	Partitions int             `json:"partitions,omitempty"`
	Partition  int             `json:"partition,omitempty"`
	// On is the join's whole condition as SQL text over the joined row
	// (_c1.._cn: the left input's outputs, then the right's), of the
	// column types OnTypes; "" leaves it to the gateway.
	On      string   `json:"on,omitempty"`
	OnTypes []uint32 `json:"on_types,omitempty"`
}

// fragPlace is a producer fragment of a repartition: a tablet's span on
// the node believed to lead it.
type fragPlace struct {
	Node     uint64        `json:"node"`
	TabletID kvpb.TabletID `json:"tablet"`
	Span     kvpb.Span     `json:"span"`
}

// fragPartition (fragProc.Partition) keeps only the output rows whose
// key (outputs at Cols) is not NULL and hashes to P of N.
type fragPartition struct {
	Cols []int `json:"cols"`
	N    int   `json:"n"`
	P    int   `json:"p"`
}

// partitionOf is the partition of a row's key among n: the same on every
// node (FNV-1a of the key's encoding, which equal keys share: hashKey,
// as the hash join's table uses).
func partitionOf(key []byte, n int) int {
	h := fnv.New32a()
	_, _ = h.Write(key)
	return int(h.Sum32() % uint32(n))
}

// joinCosts are the cost model's figures for one join (see the file's
// comment); a mode that does not apply is absent.
type joinCosts map[string]float64

// distJoin returns a distributed operator for the inner equi-join n, or
// nil to build it as usual (its inputs may still distribute on their
// own).
func (r *runner) distJoin(n *plan.Join) (op, error) {
	if n.Kind != plan.InnerJoin || n.Lateral || len(n.LeftEq) == 0 {
		return nil, nil
	}
	lcols, rcols := n.Left.Columns(), n.Right.Columns()
	leq, err1 := colPositions(lcols, n.LeftEq)
	req, err2 := colPositions(rcols, n.RightEq)
	if err1 != nil || err2 != nil || len(leq) != len(req) {
		return nil, nil
	}
	for i := range leq {
		// Keys hash alike on both sides only with one type.
		if lcols[leq[i]].T.Oid != rcols[req[i]].T.Oid {
			return nil, nil
		}
	}
	var lch, rch *distChain
	if r.dist.auto {
		// auto: at least one input must span nodes by itself; checked
		// first so that small joins pay no expression checks. The
		// other may then be on one node (a reference table, a small
		// table to broadcast).
		lch, rch = r.distChainAt(n.Left, true), r.distChainAt(n.Right, true)
		if lch == nil && rch == nil {
			return nil, nil
		}
	}
	if lch == nil {
		lch = r.distChainAt(n.Left, false)
	}
	if rch == nil {
		rch = r.distChainAt(n.Right, false)
	}
	// A scan's own limit holds over all its tablets together: a
	// fragment cannot apply it to its part of a join.
	if lch != nil && lch.gatewayLimit > 0 {
		lch = nil
	}
	if rch != nil && rch.gatewayLimit > 0 {
		rch = nil
	}
	if lch == nil && rch == nil {
		return nil, nil
	}
	L, R, J := n.LeftRows, n.RightRows, n.Rows
	if L <= 0 || R <= 0 {
		L, R = 1000, 1000 // not estimated: no side looks small
	}
	if J <= 0 {
		J = max(L, R)
	}
	nodes := map[uint64]bool{}
	for _, ch := range []*distChain{lch, rch} {
		if ch != nil {
			for _, f := range ch.frags {
				nodes[f.Node] = true
			}
		}
	}
	if r.dist.auto && len(nodes) < 2 {
		return nil, nil // auto: only plans on more than one node
	}
	N := float64(max(len(nodes), 1))
	costs := joinCosts{}
	var colo []distsql.Fragment
	if lch != nil && rch != nil {
		if colo = r.colocatedFrags(lch, rch, leq, req); colo != nil {
			costs[joinColocated] = J + (L+R)/N
		}
		costs[joinRepartition] = (L + R) + J + (L+R)/N
	}
	small := func(S, B float64, F int) float64 { return S*float64(F+1) + J + (B+S*float64(F))/N }
	// A reference table is read whole by every fragment of the other
	// input, through the fragment's own node: no gateway hop.
	if lch != nil && rch != nil && rch.reference() {
		costs[joinReference+" right"] = R*float64(len(lch.frags)) + J + (L+R*float64(len(lch.frags)))/N
	}
	if lch != nil && rch != nil && lch.reference() && !rch.reference() {
		costs[joinReference+" left"] = L*float64(len(rch.frags)) + J + (R+L*float64(len(rch.frags)))/N
	}
	if lch != nil && shipsRows(n.Right) {
		costs[joinBroadcast+" right"] = small(R, L, len(lch.frags))
	}
	if rch != nil && shipsRows(n.Left) {
		costs[joinBroadcast+" left"] = small(L, R, len(rch.frags))
	}
	forced := r.setting("sql.testing.distsql_join")
	if forced == "off" {
		return nil, nil
	}
	best, bestCost := "", 0.0
	for _, m := range []string{joinColocated, joinReference + " right", joinReference + " left", joinBroadcast + " right", joinBroadcast + " left", joinRepartition} {
		c, ok := costs[m]
		if !ok || (forced != "auto" && forced != "" && !strings.HasPrefix(m, forced)) {
			continue
		}
		if best == "" || c < bestCost {
			best, bestCost = m, c
		}
	}
	if best == "" || (r.dist.auto && (forced == "auto" || forced == "") && bestCost >= 2*(L+R)) {
		return nil, nil
	}
	onText, onTypes := joinOnText(n, lcols, rcols)
	on := func([]types.Datum) (bool, error) { return true, nil }
	if onText == "" {
		// The gateway applies a condition fragments cannot run.
		var err error
		if on, err = r.compilePred(n.On, append(append([]plan.Column{}, lcols...), rcols...)); err != nil {
			return nil, nil
		}
	}
	o := &distJoinOp{r: r, n: n, on: on}
	withOn := func(j *fragJoin) *fragJoin {
		j.On, j.OnTypes = onText, onTypes
		return j
	}
	var frags []distsql.Fragment
	var text string
	switch best {
	case joinColocated:
		if _, err := r.encodeChain(rch); err != nil {
			return nil, err
		}
		lch.proc.Join = withOn(&fragJoin{Mode: joinColocated, LeftEq: leq, RightEq: req, Right: &rch.proc})
		for i := range colo {
			lch.proc.Join.RightSpan = &colo[i].Spec.Span
			p, err := r.encodeChain(lch)
			if err != nil {
				return nil, err
			}
			frags = append(frags, distsql.Fragment{Node: lch.frags[i].Node, Spec: lch.frags[i].Spec})
			frags[i].Spec.Proc = p
		}
		o.mode = joinColocated
		text = fmt.Sprintf("Join: colocated (both inputs hash partitioned on the key, %d tablet pairs)", len(frags))
	case joinReference + " right", joinReference + " left":
		big, ref, side := lch, rch, "right"
		if best == joinReference+" left" {
			big, ref, side = rch, lch, "left"
		}
		if _, err := r.encodeChain(ref); err != nil {
			return nil, err
		}
		big.proc.Join = withOn(&fragJoin{Mode: joinReference, LeftEq: leq, RightEq: req, Right: &ref.proc, RightSpan: &ref.spans[0], RefLeft: side == "left"})
		p, err := r.encodeChain(big)
		if err != nil {
			return nil, err
		}
		for _, f := range big.frags {
			f.Spec.Proc = p
			frags = append(frags, f)
		}
		o.mode = joinReference
		text = fmt.Sprintf("Join: with reference table %s (the %s input), read whole by each of %d %s", ref.scan.Table.Name, side, len(frags), plural(int64(len(frags)), "fragment", "fragments"))
	case joinBroadcast + " right", joinBroadcast + " left":
		big, smallNode, est := lch, n.Right, R
		if best == joinBroadcast+" left" {
			big, smallNode, est = rch, n.Left, L
		}
		big.proc.Join = withOn(&fragJoin{Mode: joinBroadcast, LeftEq: leq, RightEq: req, SmallLeft: smallNode == n.Left})
		o.mode, o.big, o.small, o.bigNode = joinBroadcast, big, smallNode, n.Left
		if smallNode == n.Left {
			o.bigNode = n.Right
		}
		frags = big.frags
		side := "right"
		if smallNode == n.Left {
			side = "left"
		}
		text = fmt.Sprintf("Join: broadcast of the %s input (estimated %.0f rows) to %d %s", side, est, len(frags), plural(int64(len(frags)), "fragment", "fragments"))
	case joinRepartition:
		lp, err := r.encodeChain(lch)
		if err != nil {
			return nil, err
		}
		rp, err := r.encodeChain(rch)
		if err != nil {
			return nil, err
		}
		ids := make([]uint64, 0, len(nodes))
		for id := range nodes {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		fj := fragJoin{Mode: joinRepartition, LeftEq: leq, RightEq: req, LeftProc: lp, RightProc: rp,
			LeftFrags: places(lch.frags), RightFrags: places(rch.frags), Partitions: len(ids), On: onText, OnTypes: onTypes}
		for k, id := range ids {
			fj.Partition = k
			p, err := json.Marshal(fragProc{Join: &fj, WorkMem: r.x.WorkMem})
			if err != nil {
				return nil, fmt.Errorf("exec: encoding a repartitioned join: %w", err)
			}
			frags = append(frags, distsql.Fragment{Node: id, Spec: distsql.Spec{Fragment: k, Proc: p}})
		}
		o.mode = joinRepartition
		text = fmt.Sprintf("Join: hash repartitioned on the key into %d partitions (%d + %d producer fragments)", len(ids), len(lch.frags), len(rch.frags))
	}
	if r.dist.auto && (forced == "auto" || forced == "") && distsql.Nodes(frags) < 2 {
		return nil, nil // auto: only plans on more than one node
	}
	o.frags = frags
	o.text = text
	r.dist.planned = &distPlanned{display: n, frags: frags, join: text}
	if s := r.x.Stats; s != nil {
		s.addDist(n, frags)
		s.node(n).FragmentRows = true
		s.node(n).DistJoin = text
		for _, ch := range []*distChain{lch, rch} {
			if ch != nil && (o.mode != joinBroadcast || ch == o.big) {
				for _, x := range ch.nodes {
					s.node(x).Remote = true
				}
			}
		}
	}
	return o, nil
}

// joinOnText is n.On as a fragment runs it over the joined row (left
// outputs, then right ones, named _c1.._cn) and those columns' type
// OIDs, or "" when it cannot ship (shipExpr) or a column's type does
// not come back whole from its OID.
func joinOnText(n *plan.Join, lcols, rcols []plan.Column) (string, []uint32) {
	if n.On == nil {
		return "", nil
	}
	both := append(append([]plan.Column{}, lcols...), rcols...)
	cols := make([]plan.Column, len(both))
	oids := make([]uint32, len(both))
	env := make(map[sem.ColumnID]sem.Expr, len(both))
	for i, c := range both {
		t, ok := types.OidToType(c.T.Oid)
		if !ok || t.Typmod() != c.T.Typmod() || t.Family == types.EnumFamily || t.Family == types.ArrayFamily {
			return "", nil
		}
		cols[i] = plan.Column{ID: sem.ColumnID(i + 1), Name: fragColName(i), T: t}
		env[c.ID] = &sem.ColRef{ID: cols[i].ID, T: t, Name: cols[i].Name}
		oids[i] = c.T.Oid
	}
	text, ok := shipExpr(subst(n.On, env), cols, types.Bool)
	if !ok {
		return "", nil
	}
	return text, oids
}

// fragOn compiles a join fragment's shipped condition (always true
// without one) over the joined row of width w.
func (r *runner) fragOn(j *fragJoin, w int) (func([]types.Datum) (bool, error), error) {
	if j.On == "" {
		return func([]types.Datum) (bool, error) { return true, nil }, nil
	}
	if len(j.OnTypes) != w {
		return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: join condition over %d columns, the joined row has %d", len(j.OnTypes), w)
	}
	cols := make([]plan.Column, w)
	for i, oid := range j.OnTypes {
		t, ok := types.OidToType(oid)
		if !ok {
			return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: join condition over a column of type %d", oid)
		}
		cols[i] = plan.Column{ID: sem.ColumnID(i + 1), Name: fragColName(i), T: t}
	}
	e, err := buildFragExpr(j.On, cols, types.Bool)
	if err != nil {
		return nil, err
	}
	return r.compilePred(e, cols)
}

// shipsRows says whether n's rows can travel in a Spec: no arrays (rows
// ship without element types) and no enums (their labels live in type
// descriptors the fragment does not read).
func shipsRows(n plan.Node) bool {
	for _, c := range n.Columns() {
		if c.T.Family == types.ArrayFamily || c.T.Family == types.EnumFamily {
			return false
		}
	}
	return true
}

// places is frags as a repartition's producers.
func places(frags []distsql.Fragment) []fragPlace {
	out := make([]fragPlace, len(frags))
	for i, f := range frags {
		out[i] = fragPlace{Node: f.Node, TabletID: f.Spec.TabletID, Span: f.Spec.Span}
	}
	return out
}

// encodeChain returns ch's processing as a fragment's JSON.
func (r *runner) encodeChain(ch *distChain) ([]byte, error) {
	tb, err := catalog.Encode(ch.scan.Table)
	if err != nil {
		return nil, fmt.Errorf("exec: encoding a distributed fragment's table: %w", err)
	}
	ch.proc.Table = tb
	ch.proc.WorkMem = r.x.WorkMem
	p, err := json.Marshal(ch.proc)
	if err != nil {
		return nil, fmt.Errorf("exec: encoding a distributed fragment: %w", err)
	}
	return p, nil
}

// colocatedFrags returns, for each fragment of lch, the fragment of rch
// reading the same buckets, or nil when the two are not colocated: both
// whole scans of hash-partitioned tables hashed on one column each, some
// key pair being those two columns, and every left tablet's bucket range
// exactly one right tablet's.
func (r *runner) colocatedFrags(lch, rch *distChain, leq, req []int) []distsql.Fragment {
	if lch.layout == nil || rch.layout == nil || lch.layout.HashColumns != 1 || rch.layout.HashColumns != 1 {
		return nil
	}
	lcol, rcol := lch.layout.HashColumnIDs()[0], rch.layout.HashColumnIDs()[0]
	keyed := false
	for i := range leq {
		if lch.outputColumn(leq[i]) == lcol && rch.outputColumn(req[i]) == rcol {
			keyed = true
		}
	}
	if !keyed || len(lch.frags) != len(rch.frags) {
		return nil
	}
	lp, rp := rowenc.GroupPrefix(nil, lch.layout.GroupID), rowenc.GroupPrefix(nil, rch.layout.GroupID)
	move := func(k []byte) ([]byte, bool) {
		switch {
		case bytes.HasPrefix(k, lp):
			return append(bytes.Clone(rp), k[len(lp):]...), true
		case bytes.Equal(k, keys.PrefixEnd(lp)):
			return keys.PrefixEnd(rp), true
		}
		return nil, false
	}
	run := distsql.FromContext(r.ctx)
	out := make([]distsql.Fragment, len(lch.frags))
	for i, f := range lch.frags {
		k, ok1 := move(f.Spec.Span.Key)
		e, ok2 := move(f.Spec.Span.EndKey)
		if !ok1 || !ok2 {
			return nil
		}
		rf, err := run.Planner.PlanScan(r.ctx, kvpb.Span{Key: k, EndKey: e}, distsql.Snapshot{})
		if err != nil || len(rf) != 1 {
			return nil
		}
		out[i] = rf[0]
	}
	return out
}

// reference says whether ch reads a reference table, over one span.
func (ch *distChain) reference() bool {
	return ch.scan.Table.Partitioning.Reference && len(ch.spans) == 1
}

// outputColumn is the table column the chain's i-th output is, or 0
// when it is computed.
func (ch *distChain) outputColumn(i int) rowenc.ColumnID {
	cols := ch.top.Columns()
	if i < 0 || i >= len(cols) {
		return 0
	}
	c, ok := ch.env[cols[i].ID].(*sem.ColRef)
	if !ok || int(c.ID) < 1 || int(c.ID) > len(ch.scan.TableCols) {
		return 0
	}
	return ch.scan.TableCols[c.ID-1]
}

// distJoinOp is the gateway's side of a distributed join: it starts the
// fragments (a broadcast first computes and ships the small input), and
// keeps the rows that meet the join's condition.
type distJoinOp struct {
	r     *runner
	n     *plan.Join
	mode  string
	text  string
	frags []distsql.Fragment
	on    func([]types.Datum) (bool, error)
	// Broadcast: big is the chain the fragments read, bigNode its plan,
	// small the input computed here.
	big     *distChain
	bigNode plan.Node
	small   plan.Node

	in      op
	started bool
}

func (o *distJoinOp) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.started {
		o.started = true
		in, err := o.start(ctx)
		if err != nil {
			return nil, err
		}
		o.in = in
	}
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, o.in, k)
		if err != nil || row == nil {
			return nil, err
		}
		ok, err := o.on(row)
		if err != nil {
			return nil, err
		}
		if ok {
			return row, nil
		}
	}
}

// start returns the joined rows' source: the fragments' flow, or for a
// broadcast whose input outgrew maxBroadcastBytes a join here.
func (o *distJoinOp) start(ctx context.Context) (op, error) {
	if o.mode != joinBroadcast {
		return &distRowsOp{r: o.r, node: o.n, frags: o.frags, anyOrder: true}, nil
	}
	small, err := o.r.build(o.small)
	if err != nil {
		return nil, err
	}
	defer small.Close()
	var rows [][]types.Datum
	var enc [][]byte
	size := 0
	acc := o.r.account()
	for k := 0; ; k++ {
		if k%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				acc.Clear()
				return nil, err
			}
		}
		row, err := small.Next(ctx)
		if err != nil {
			acc.Clear()
			return nil, err
		}
		if row == nil {
			break
		}
		row = slices.Clone(row)
		if err := acc.Force(rowcontainer.RowSize(row)); err != nil {
			acc.Clear()
			return nil, err
		}
		rows = append(rows, row)
		if enc != nil || size == 0 {
			b, err := rowcontainer.EncodeRow(nil, row)
			if err != nil || size+len(b) > maxBroadcastBytes {
				enc, size = nil, -1 // join here
				continue
			}
			enc = append(enc, b)
			size += len(b)
		}
	}
	if size < 0 {
		// Larger than estimated: join here, the big input read as usual.
		big, err := o.r.build(o.bigNode)
		if err != nil {
			acc.Clear()
			return nil, err
		}
		on, err := o.r.compilePred(o.n.On, append(append([]plan.Column{}, o.n.Left.Columns()...), o.n.Right.Columns()...))
		if err != nil {
			big.Close()
			acc.Clear()
			return nil, err
		}
		j := &joinOp{r: o.r, n: &plan.Join{Kind: plan.InnerJoin}, acc: o.r.account(), on: on}
		j.leftEq, j.rightEq = o.big.proc.Join.LeftEq, o.big.proc.Join.RightEq
		j.lw, j.rw = len(o.n.Left.Columns()), len(o.n.Right.Columns())
		if o.big.proc.Join.SmallLeft {
			j.left, j.right = &sliceOp{rows: rows}, big
		} else {
			j.left, j.right = big, &sliceOp{rows: rows}
		}
		return &funcOp{next: j.Next, close: func() { j.Close(); acc.Clear() }}, nil
	}
	acc.Clear()
	o.big.proc.Join.Rows = enc
	p, err := o.r.encodeChain(o.big)
	if err != nil {
		return nil, err
	}
	frags := o.frags
	for i := range frags {
		frags[i].Spec.Proc = p
	}
	return &distRowsOp{r: o.r, node: o.n, frags: frags, anyOrder: true}, nil
}

func (o *distJoinOp) Close() {
	if o.in != nil {
		o.in.Close()
		o.in = nil
	}
}

// runJoin runs a join fragment's processing fp over spec: builds both
// inputs (tablet scans, broadcast rows or repartitioned sub-flows) and
// the hash join of them.
func (p *FragmentProcessor) runJoin(ctx context.Context, r *runner, fp *fragProc, spec distsql.Spec) (op, error) {
	j := fp.Join
	var left, right op
	var lw, rw int
	closeAll := func() {
		for _, o := range []op{left, right} {
			if o != nil {
				o.Close()
			}
		}
	}
	chain := func(c *fragProc, span kvpb.Span) (op, int, error) {
		top, scan, err := c.chainPlan()
		if err != nil {
			return nil, 0, err
		}
		if r.fragScans == nil {
			r.fragScans = map[*plan.Scan]kvpb.Span{}
		}
		r.fragScans[scan] = span
		o, err := r.build(top)
		return o, len(top.Columns()), err
	}
	var err error
	switch j.Mode {
	case joinColocated, joinReference:
		if j.Right == nil || j.RightSpan == nil {
			return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: %s join fragment without its other input", j.Mode)
		}
		if left, lw, err = chain(fp, spec.Span); err == nil {
			right, rw, err = chain(j.Right, *j.RightSpan)
		}
		if j.RefLeft {
			left, lw, right, rw = right, rw, left, lw
		}
	case joinBroadcast:
		var big op
		var bw int
		if big, bw, err = chain(fp, spec.Span); err != nil {
			break
		}
		rows := make([][]types.Datum, 0, len(j.Rows))
		sw := 0
		for _, b := range j.Rows {
			row, derr := rowcontainer.DecodeRow(b)
			if derr != nil {
				big.Close()
				return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: broadcast row: %v", derr)
			}
			sw = len(row)
			rows = append(rows, row)
		}
		if len(rows) == 0 {
			big.Close()
			return &sliceOp{}, nil // an inner join with nothing
		}
		if j.SmallLeft {
			left, lw, right, rw = &sliceOp{rows: rows}, sw, big, bw
		} else {
			left, lw, right, rw = big, bw, &sliceOp{rows: rows}, sw
		}
	case joinRepartition:
		if p.Runner == nil || p.Runner.Gateway == nil {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "exec: this node cannot start repartitioning flows")
		}
		sub := func(procJSON json.RawMessage, places []fragPlace, key []int) (op, int, error) {
			var cp fragProc
			if err := json.Unmarshal(procJSON, &cp); err != nil {
				return nil, 0, pgerror.New(pgerrcode.ProtocolViolation, "exec: corrupt repartitioned input: %v", err)
			}
			cp.Partition = &fragPartition{Cols: key, N: j.Partitions, P: j.Partition}
			b, err := json.Marshal(cp)
			if err != nil {
				return nil, 0, err
			}
			frags := make([]distsql.Fragment, len(places))
			for i, pl := range places {
				frags[i] = distsql.Fragment{Node: pl.Node, Spec: distsql.Spec{Fragment: i, TabletID: pl.TabletID, Span: pl.Span, Snapshot: spec.Snapshot, Proc: b}}
			}
			return &flowOp{flow: p.Runner.Gateway.Start(ctx, frags, p.Memory)}, cp.width(), nil
		}
		if left, lw, err = sub(j.LeftProc, j.LeftFrags, j.LeftEq); err == nil {
			right, rw, err = sub(j.RightProc, j.RightFrags, j.RightEq)
		}
	default:
		return nil, pgerror.New(pgerrcode.ProtocolViolation, "exec: unknown distributed join %q", j.Mode)
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	on, err := r.fragOn(j, lw+rw)
	if err != nil {
		closeAll()
		return nil, err
	}
	return &joinOp{r: r, n: &plan.Join{Kind: plan.InnerJoin}, left: left, right: right, lw: lw, rw: rw,
		leftEq: j.LeftEq, rightEq: j.RightEq, acc: r.account(), on: on}, nil
}

// flowOp reads the rows of a flow's fragments (in any order).
type flowOp struct {
	flow *distsql.Flow
	buf  [][]types.Datum
	bi   int
}

func (o *flowOp) Next(ctx context.Context) ([]types.Datum, error) {
	for o.bi >= len(o.buf) {
		if o.flow == nil {
			return nil, nil
		}
		b, ok, err := o.flow.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			o.Close()
			return nil, nil
		}
		o.buf, o.bi = o.buf[:0], 0
		if o.buf, err = decodeRows(b, o.buf); err != nil {
			return nil, err
		}
	}
	row := o.buf[o.bi]
	o.buf[o.bi] = nil
	o.bi++
	return row, nil
}

func (o *flowOp) Close() {
	if o.flow != nil {
		o.flow.Close()
		o.flow = nil
	}
}
