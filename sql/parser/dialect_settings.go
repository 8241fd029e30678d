package parser

// CockroachDB's cluster setting statements (rule cluster-setting of
// dialect.go), as PostgreSQL's server-wide settings statements, which
// sql/session runs against the cluster's settings:
//
//	SET CLUSTER SETTING name = value | TO value  → ALTER SYSTEM SET name = value
//	SET CLUSTER SETTING name = DEFAULT           → ALTER SYSTEM RESET name
//	SHOW CLUSTER SETTING name                    → SHOW name
func applyClusterSetting(w *stmtRewriter, i int) (int, error) {
	if i != 0 || (w.word(0) != "set" && w.word(0) != "show") || w.word(1) != "cluster" || w.word(2) != "setting" {
		return i, nil
	}
	end := len(w.toks) - 1
	last := w.qualName(3)
	if last < 0 {
		return i, w.errorAt(3, "expected a setting name")
	}
	name := w.src[w.toks[3].start:w.toks[last].end]
	if w.word(0) == "show" {
		if last != end {
			return i, w.errorAt(last+1, "expected end of statement after the setting name")
		}
		w.note(&w.notes, "cluster-setting", 0, end)
		return len(w.toks), w.replace(0, end, synth(w.toks[0].start, "SHOW "+name))
	}
	if op := w.word(last + 1); op != "=" && op != "to" {
		return i, w.errorAt(last+1, "expected = or TO after the setting name")
	}
	if last+2 > end {
		return i, w.errorAt(last+2, "expected a value")
	}
	text := "ALTER SYSTEM SET " + name + " = " + w.src[w.toks[last+2].start:w.toks[end].end]
	if last+2 == end && w.word(end) == "default" {
		text = "ALTER SYSTEM RESET " + name
	}
	w.note(&w.notes, "cluster-setting", 0, end)
	return len(w.toks), w.replace(0, end, synth(w.toks[0].start, text))
}
