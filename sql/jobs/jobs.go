// Package jobs owns the records of long-running work the SQL layer does
// outside a statement's transaction (moving a table in or out of its
// database's colocation tablet, sql/ddl colocation_job.go; an online index
// build, sql/ddl index_job.go). A job
// record says what the work is, who asked for it, where it stands
// (running, succeeded, failed, canceled), how far it got
// (fraction_completed) and when it was created, started, last heard of
// and finished; SHOW JOBS and cairn_catalog.jobs read them.
//
// Records live in the system keyspace, one key per job:
//
//	j/<id>   the record, JSON (id: 8 bytes big-endian)
//	jid      the ID counter (kvpb.IncrementRequest)
//	jc/<id>  a cancel request (CANCEL JOB), written once, never removed
//
// A record is written outside any user transaction (kv.DB.Put), so
// another session sees progress as it is made. The package runs nothing
// itself: the code doing the work updates its record (Job.Progress, and
// Job.Heartbeat, which a running job calls at least every HeartbeatEvery)
// and ends it (Job.Finish). A running record whose Modified is older than
// OrphanAfter belongs to work that stopped without ending it (its node
// died): Record.Orphaned tells, and the owner of that kind of work decides
// what to do (the table move rolls it back when the table is next moved).
// A node looking for orphans every few seconds lists through an
// Unfinished (unfinished.go), which reads from the oldest job that may
// still be running instead of every record ever written.
package jobs

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
)

// Status is where a job stands.
type Status string

// Job statuses. Only running is not final.
const (
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled"
)

// Record is one job as stored.
type Record struct {
	ID          int64  `json:"id"`
	Type        string `json:"type"`
	Description string `json:"description"`
	User        string `json:"user"`
	Status      Status `json:"status"`
	// Fraction is the share of the work done, 0 to 1.
	Fraction float64   `json:"fraction"`
	Created  time.Time `json:"created"`
	Started  time.Time `json:"started"`
	// Modified is when the record was last written: a running job
	// rewrites it at least every HeartbeatEvery.
	Modified time.Time `json:"modified"`
	Finished time.Time `json:"finished,omitzero"`
	Error    string    `json:"error,omitempty"`
	// Payload is what the work needs to find its state again (the moved
	// table's ID), for the kind of work's own code.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// HeartbeatEvery is how often a running job rewrites its record when it
// has no progress to report; OrphanAfter is how long a running record may
// go unwritten before it counts as abandoned. Variables so that tests can
// shorten them.
var (
	HeartbeatEvery = time.Second
	OrphanAfter    = 15 * time.Second
)

// Orphaned reports whether r is a running job that nothing has written
// for OrphanAfter at now: its node stopped while it ran.
func (r Record) Orphaned(now time.Time) bool {
	return r.Status == StatusRunning && now.Sub(r.Modified) > OrphanAfter
}

func recordPrefix() []byte { return keys.System([]byte("j/")) }

func recordKey(id int64) []byte {
	return binary.BigEndian.AppendUint64(recordPrefix(), uint64(id))
}

func counterKey() []byte { return keys.System([]byte("jid")) }

// Job is a running job's handle, held by the code doing the work.
type Job struct {
	db *kv.DB
	mu sync.Mutex
	r  Record
}

// Create stores a new running job (its ID, timestamps and status are
// filled in) and returns its handle.
func Create(ctx context.Context, db *kv.DB, r Record) (*Job, error) {
	id, err := db.Inc(ctx, counterKey(), 1)
	if err != nil {
		return nil, fmt.Errorf("jobs: allocating a job ID: %w", err)
	}
	now := time.Now().UTC()
	r.ID, r.Status, r.Fraction, r.Error = id, StatusRunning, 0, ""
	r.Created, r.Started, r.Modified, r.Finished = now, now, now, time.Time{}
	j := &Job{db: db, r: r}
	if err := j.write(ctx); err != nil {
		return nil, err
	}
	return j, nil
}

// Adopt returns a handle on the stored job id, to finish it (an orphaned
// job rolled back by someone else).
func Adopt(ctx context.Context, db *kv.DB, id int64) (*Job, error) {
	b, ok, err := db.Get(ctx, recordKey(id))
	if err != nil {
		return nil, fmt.Errorf("jobs: reading job %d: %w", id, err)
	}
	if !ok {
		return nil, fmt.Errorf("jobs: job %d does not exist", id)
	}
	r, err := decode(b)
	if err != nil {
		return nil, err
	}
	return &Job{db: db, r: r}, nil
}

// Claim takes over job id to go on with its work, if it is still
// orphaned: its record is read and rewritten (a heartbeat) in one
// serializable transaction, so of two nodes claiming it at once one wins
// and the other finds it alive (false). The caller keeps it alive
// (KeepAlive) from then on.
func Claim(ctx context.Context, db *kv.DB, id int64) (*Job, bool, error) {
	var r Record
	claimed := false
	err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		claimed = false
		b, ok, err := txn.Get(ctx, recordKey(id))
		if err != nil || !ok {
			return err
		}
		if r, err = decode(b); err != nil {
			return err
		}
		now := time.Now()
		if !r.Orphaned(now) {
			return nil
		}
		r.Modified = now.UTC()
		enc, err := json.Marshal(r)
		if err != nil {
			return err
		}
		claimed = true
		return txn.Put(ctx, recordKey(id), enc)
	})
	if err != nil {
		return nil, false, fmt.Errorf("jobs: claiming job %d: %w", id, err)
	}
	if !claimed {
		return nil, false, nil
	}
	return &Job{db: db, r: r}, true, nil
}

// ID returns the job's ID.
func (j *Job) ID() int64 { return j.r.ID }

// Record returns the job's record as last written.
func (j *Job) Record() Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.r
}

// Progress records the share of the work done (clamped to [0, 1]; a
// value below the last one recorded is ignored, so progress only grows).
func (j *Job) Progress(ctx context.Context, f float64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	f = min(max(f, 0), 1)
	if f > j.r.Fraction {
		j.r.Fraction = f
	}
	j.r.Modified = time.Now().UTC()
	return j.writeLocked(ctx)
}

// SetPayload records the work's state (Record.Payload) and the share of
// it done (as Progress), in one write: an index build's phase and row
// counts, which pg_stat_progress_create_index shows.
func (j *Job) SetPayload(ctx context.Context, payload json.RawMessage, f float64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	f = min(max(f, 0), 1)
	if f > j.r.Fraction {
		j.r.Fraction = f
	}
	j.r.Payload = payload
	j.r.Modified = time.Now().UTC()
	return j.writeLocked(ctx)
}

// cancelKey is where CANCEL JOB asks a running job to stop: a key of its
// own, so the job's heartbeats (which rewrite the record) cannot lose it.
func cancelKey(id int64) []byte {
	return binary.BigEndian.AppendUint64(keys.System([]byte("jc/")), uint64(id))
}

// RequestCancel asks running job id to stop (CANCEL JOB). The job sees it
// at its next check (CancelRequested) and rolls back. It fails with
// ErrNotRunning if the job is not running.
func RequestCancel(ctx context.Context, db *kv.DB, id int64) error {
	r, ok, err := Get(ctx, db, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: job %d does not exist", ErrNoJob, id)
	}
	if r.Status != StatusRunning {
		return fmt.Errorf("%w: job %d is %s", ErrNotRunning, id, r.Status)
	}
	if err := db.Put(ctx, cancelKey(id), []byte{1}); err != nil {
		return fmt.Errorf("jobs: canceling job %d: %w", id, err)
	}
	return nil
}

// Errors of RequestCancel.
var (
	ErrNoJob      = errors.New("jobs: no such job")
	ErrNotRunning = errors.New("jobs: not running")
)

// CancelRequested reports whether CANCEL JOB asked j to stop.
func (j *Job) CancelRequested(ctx context.Context) (bool, error) {
	_, ok, err := j.db.Get(ctx, cancelKey(j.r.ID))
	if err != nil {
		return false, fmt.Errorf("jobs: reading job %d's cancel request: %w", j.r.ID, err)
	}
	return ok, nil
}

// Heartbeat rewrites the record so that it does not count as orphaned.
func (j *Job) Heartbeat(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.r.Modified = time.Now().UTC()
	return j.writeLocked(ctx)
}

// KeepAlive calls Heartbeat every HeartbeatEvery until the returned stop
// is called (which waits for a heartbeat in progress).
func (j *Job) KeepAlive(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A failed heartbeat is retried at the next tick; a job
				// that cannot write its record for OrphanAfter is treated
				// as dead, which the owner's roll-back handles.
				_ = j.Heartbeat(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Finish ends the job with status (succeeded: fraction 1) and, for a
// failure, its error.
func (j *Job) Finish(ctx context.Context, status Status, cause error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := time.Now().UTC()
	j.r.Status, j.r.Modified, j.r.Finished = status, now, now
	if status == StatusSucceeded {
		j.r.Fraction = 1
	}
	if cause != nil {
		j.r.Error = cause.Error()
	}
	return j.writeLocked(ctx)
}

func (j *Job) write(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.writeLocked(ctx)
}

func (j *Job) writeLocked(ctx context.Context) error {
	b, err := json.Marshal(j.r)
	if err != nil {
		return fmt.Errorf("jobs: encoding job %d: %w", j.r.ID, err)
	}
	if err := j.db.Put(ctx, recordKey(j.r.ID), b); err != nil {
		return fmt.Errorf("jobs: writing job %d: %w", j.r.ID, err)
	}
	return nil
}

func decode(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("jobs: decoding a job record: %w", err)
	}
	return r, nil
}

// Reader is what List and Get read with: a kv.Txn (a statement's, so
// that a query sees one snapshot) or a kv.DB.
type Reader interface {
	Get(ctx context.Context, key []byte) ([]byte, bool, error)
	Scan(ctx context.Context, start, end []byte, maxRows int64) ([]kvpb.KeyValue, error)
}

// List returns every job, oldest first.
func List(ctx context.Context, rd Reader) ([]Record, error) {
	return listFrom(ctx, rd, 0)
}

// listFrom returns the jobs numbered from on, oldest first.
func listFrom(ctx context.Context, rd Reader, from int64) ([]Record, error) {
	p := recordPrefix()
	start, end := p, keys.PrefixEnd(p)
	if from > 0 {
		start = recordKey(from)
	}
	var out []Record
	const page = 1000
	for {
		kvs, err := rd.Scan(ctx, start, end, page)
		if err != nil {
			return nil, fmt.Errorf("jobs: listing: %w", err)
		}
		for _, kv := range kvs {
			r, err := decode(kv.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		if len(kvs) < page {
			return out, nil
		}
		start = keys.Next(kvs[len(kvs)-1].Key)
	}
}

// Get returns job id.
func Get(ctx context.Context, rd Reader, id int64) (Record, bool, error) {
	b, ok, err := rd.Get(ctx, recordKey(id))
	if err != nil || !ok {
		return Record{}, false, err
	}
	r, err := decode(b)
	return r, err == nil, err
}
