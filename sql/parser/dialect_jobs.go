package parser

// CockroachDB's SHOW JOBS and SHOW JOB n (rule show-jobs of dialect.go),
// which the PostgreSQL grammar reads as SHOW of a setting named "jobs":
//
//	SHOW JOBS    → SELECT <columns> FROM cairn_catalog.jobs ORDER BY job_id
//	SHOW JOB n   → ... WHERE job_id = n
//	CANCEL JOB n → SELECT cairn_cancel_job(n)
//
// The view is package jobs' records (sql/pgcatalog jobs.go).

const showJobsSelect = "SELECT job_id, job_type, description, user_name, status, fraction_completed, " +
	"created, started, modified, finished, error FROM cairn_catalog.jobs"

func applyShowJobs(w *stmtRewriter, i int) (int, error) {
	if i == 0 && w.word(0) == "cancel" && w.word(1) == "job" {
		end := len(w.toks) - 1
		if end != 2 || !w.tok(2).isNumber() {
			return i, w.errorAt(2, "expected a job ID")
		}
		w.note(&w.notes, "show-jobs", 0, end)
		id := w.src[w.toks[2].start:w.toks[2].end]
		return len(w.toks), w.replace(0, end, synth(w.toks[0].start, "SELECT cairn_cancel_job("+id+")"))
	}
	if i != 0 || w.word(0) != "show" {
		return i, nil
	}
	end := len(w.toks) - 1
	switch {
	case w.word(1) == "jobs" && end == 1:
		w.note(&w.notes, "show-jobs", 0, end)
		return len(w.toks), w.replace(0, end, synth(w.toks[0].start, showJobsSelect+" ORDER BY job_id"))
	case w.word(1) == "job" && end == 2:
		if !w.tok(2).isNumber() {
			return i, w.errorAt(2, "expected a job ID")
		}
		w.note(&w.notes, "show-jobs", 0, end)
		id := w.src[w.toks[2].start:w.toks[2].end]
		return len(w.toks), w.replace(0, end, synth(w.toks[0].start, showJobsSelect+" WHERE job_id = "+id))
	case w.word(1) == "job" && end == 1:
		return i, w.errorAt(2, "expected a job ID")
	}
	return i, nil
}
