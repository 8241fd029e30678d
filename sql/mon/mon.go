package mon

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// ErrWorkMem is what Account.Grow returns past the account's limit
// (work_mem): a signal to spill, never an error a client sees.
var ErrWorkMem = errors.New("mon: work_mem exceeded")

// Budget is a node-wide limit on bytes (SQL memory or temporary disk).
type Budget struct {
	name  string
	limit int64 // <= 0: unlimited

	mu   sync.Mutex
	used int64
	peak int64
}

// NewBudget returns a budget of limit bytes (<= 0: unlimited). name is
// what errors call it ("SQL memory", "temporary disk").
func NewBudget(name string, limit int64) *Budget {
	return &Budget{name: name, limit: limit}
}

// Reserve grants n bytes or none (invariant 1): past the limit it
// returns a 53200 error.
func (b *Budget) Reserve(n int64) error {
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit > 0 && b.used+n > b.limit {
		return pgerror.New(pgerrcode.OutOfMemory, "out of memory").
			WithDetail("Failed on request of size %d in %s budget (%s of %s in use).", n, b.name, FormatBytes(b.used), FormatBytes(b.limit))
	}
	b.used += n
	if b.used > b.peak {
		b.peak = b.used
	}
	return nil
}

// Release gives back n bytes granted by Reserve.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		used := b.used
		b.used = 0
		b.mu.Unlock()
		panic(fmt.Sprintf("mon: %s budget released more than it granted (%d)", b.name, used))
	}
	b.mu.Unlock()
}

// Used is the bytes currently granted.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes ever granted at once.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Limit is the budget's size (<= 0: unlimited).
func (b *Budget) Limit() int64 { return b.limit }

// Account is one operator's reservation in a Budget, bounded by its own
// limit (work_mem).
type Account struct {
	b     *Budget
	limit int64 // <= 0: only the budget bounds it
	used  int64
	// peak is the most bytes the account held at once: an operator's own
	// high-water mark (an index build's sort logs it), apart from the
	// Budget's, which every account of the node shares.
	peak int64
	// s is the statement the account belongs to (nil outside one);
	// listed says s holds it in its list, which an account holding
	// nothing may leave (Statement.prune) and rejoins when it reserves.
	s      *Statement
	listed bool
}

// NewAccount opens an account of b outside any statement (tests, index
// builds); limit <= 0 means only b bounds it.
func (b *Budget) NewAccount(limit int64) *Account { return &Account{b: b, limit: limit} }

// Grow reserves n more bytes: ErrWorkMem past the account's limit
// (nothing reserved), the Budget's 53200 when the node cannot grant them.
func (a *Account) Grow(n int64) error {
	if n <= 0 {
		return nil
	}
	if a.limit > 0 && a.used+n > a.limit {
		return ErrWorkMem
	}
	return a.Force(n)
}

// Force reserves n more bytes past the account's limit: for state that
// cannot spill. Only the node budget can refuse (53200).
func (a *Account) Force(n int64) error {
	if n <= 0 {
		return nil
	}
	if a.b != nil {
		if err := a.b.Reserve(n); err != nil {
			return err
		}
	}
	a.used += n
	a.peak = max(a.peak, a.used)
	if a.s != nil && !a.listed {
		a.s.list(a)
	}
	return nil
}

// Shrink gives back n bytes (at most what the account holds).
func (a *Account) Shrink(n int64) {
	if n > a.used {
		n = a.used
	}
	if n <= 0 {
		return
	}
	a.used -= n
	if a.b != nil {
		a.b.Release(n)
	}
}

// Clear gives back everything the account holds; it stays usable.
func (a *Account) Clear() { a.Shrink(a.used) }

// Used is the bytes the account holds.
func (a *Account) Used() int64 { return a.used }

// Limit is the account's own limit (<= 0: none).
func (a *Account) Limit() int64 { return a.limit }

// Peak is the most bytes the account has held at once.
func (a *Account) Peak() int64 { return a.peak }

// Statement groups the accounts of one statement's operators.
type Statement struct {
	b        *Budget
	workMem  int64
	accounts []*Account
	// pruneAt is the list's length at which NewAccount next drops the
	// accounts holding nothing (prune).
	pruneAt int
}

// minPrune is the shortest account list a statement prunes.
const minPrune = 1024

// NewStatement opens a statement's accounting in b, each operator
// bounded by workMem bytes.
func (b *Budget) NewStatement(workMem int64) *Statement {
	return &Statement{b: b, workMem: workMem}
}

// NewAccount opens an operator's account (limit work_mem). A nil
// Statement gives an account bounded by nothing, so callers without
// accounting (tests of other packages) need no special case.
func (s *Statement) NewAccount() *Account {
	if s == nil {
		return &Account{}
	}
	if len(s.accounts) >= max(s.pruneAt, minPrune) {
		s.prune()
	}
	a := &Account{b: s.b, limit: s.workMem, s: s}
	s.list(a)
	return a
}

// list adds a to the statement's accounts.
func (s *Statement) list(a *Account) {
	a.listed = true
	s.accounts = append(s.accounts, a)
}

// prune drops the accounts that hold nothing from the list (invariant 4
// holds: one that reserves again rejoins it), so a statement that opens
// accounts without end (a correlated subquery's operators, opened again
// for every outer row) keeps a list as long as what it holds at once,
// not one entry for every operator it ever ran.
func (s *Statement) prune() {
	kept := s.accounts[:0]
	for _, a := range s.accounts {
		if a.used > 0 {
			kept = append(kept, a)
		} else {
			a.listed = false
		}
	}
	clear(s.accounts[len(kept):])
	s.accounts = kept
	s.pruneAt = 2 * len(kept)
}

// Accounts is the length of the statement's account list (for tests).
func (s *Statement) Accounts() int { return len(s.accounts) }

// WorkMem is the per-operator limit in bytes (0 for a nil Statement:
// unbounded).
func (s *Statement) WorkMem() int64 {
	if s == nil {
		return 0
	}
	return s.workMem
}

// Used is the bytes the statement's accounts hold.
func (s *Statement) Used() int64 {
	if s == nil {
		return 0
	}
	var n int64
	for _, a := range s.accounts {
		n += a.used
	}
	return n
}

// Close releases every account of the statement (invariant 4).
func (s *Statement) Close() {
	if s == nil {
		return
	}
	for _, a := range s.accounts {
		a.Clear()
		a.listed = false
	}
	s.accounts = nil
}

// FormatBytes prints n as PostgreSQL prints memory settings (kB, MB, GB).
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dkB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
