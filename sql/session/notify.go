package session

import (
	"sync"
	"sync/atomic"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// LISTEN, UNLISTEN, NOTIFY and pg_notify on one node, as PostgreSQL
// defines them: LISTEN and UNLISTEN take effect when their transaction
// commits; notifications are sent when the notifying transaction
// commits (none if it rolls back), to every session of the node
// listening on the channel then, the notifier included, each
// transaction's duplicates (same channel and payload) folded into one;
// pgwire delivers them to an idle client at once and to a busy one
// before its next ReadyForQuery outside a block (pgwire.Notifier).
// Sessions on other nodes do not hear them (docs/sql.md).

// maxNotifyPayload is PostgreSQL's limit (NAMEDATALEN-aside, 8000 bytes).
const maxNotifyPayload = 8000

// notifyHub is the node's channel registry.
type notifyHub struct {
	mu        sync.Mutex
	listeners map[string]map[*Session]struct{}
}

func (h *notifyHub) listen(s *Session, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listeners == nil {
		h.listeners = map[string]map[*Session]struct{}{}
	}
	m := h.listeners[channel]
	if m == nil {
		m = map[*Session]struct{}{}
		h.listeners[channel] = m
	}
	m[s] = struct{}{}
}

func (h *notifyHub) unlisten(s *Session, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.listeners[channel]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.listeners, channel)
		}
	}
}

// send delivers ns to the sessions listening on their channels.
func (h *notifyHub) send(ns []pgwire.Notification) {
	h.mu.Lock()
	targets := map[*Session][]pgwire.Notification{}
	for _, n := range ns {
		for s := range h.listeners[n.Channel] {
			targets[s] = append(targets[s], n)
		}
	}
	h.mu.Unlock()
	for s, list := range targets {
		s.notes.deliver(list)
	}
}

// notifyState is a session's side: what it listens to, what its open
// transaction will change or send, and what waits for its client.
type notifyState struct {
	// listening is the set in effect (committed).
	listening map[string]bool
	// pendingListen are the open transaction's LISTEN (true) and
	// UNLISTEN (false) in order; "" with false is UNLISTEN *.
	pendingListen []listenOp
	// pendingNotify are the open transaction's notifications.
	pendingNotify []pgwire.Notification

	mu     sync.Mutex // guards queue and wake: the hub delivers from other sessions
	queue  []pgwire.Notification
	wake   func()
	closed bool
	// queued is set while queue holds notifications (written under mu):
	// TakeNotifications, twice per ReadyForQuery, takes mu only then.
	queued atomic.Bool
}

type listenOp struct {
	channel string
	on      bool
}

func (n *notifyState) deliver(ns []pgwire.Notification) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.queue = append(n.queue, ns...)
	n.queued.Store(len(n.queue) > 0)
	wake := n.wake
	n.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// SetNotifyWaker implements pgwire.Notifier.
func (s *Session) SetNotifyWaker(wake func()) {
	s.notes.mu.Lock()
	s.notes.wake = wake
	s.notes.mu.Unlock()
}

// notifyTakes counts the TakeNotifications that took the queue's lock
// (tests: TestTakeNotificationsLockFree).
var notifyTakes atomic.Int64

// TakeNotifications implements pgwire.Notifier.
func (s *Session) TakeNotifications() []pgwire.Notification {
	if !s.notes.queued.Load() {
		// Nothing delivered since the last take: a delivery racing with
		// this load wakes the connection (wake) or waits for the next
		// ReadyForQuery, as one just after the lock would.
		return nil
	}
	notifyTakes.Add(1)
	s.notes.mu.Lock()
	defer s.notes.mu.Unlock()
	q := s.notes.queue
	s.notes.queue = nil
	s.notes.queued.Store(false)
	return q
}

func checkChannel(channel string) error {
	if channel == "" {
		return pgerror.New(pgerrcode.InvalidParameterValue, "channel name cannot be empty")
	}
	if len(channel) > 63 {
		return pgerror.New(pgerrcode.InvalidParameterValue, "channel name too long")
	}
	return nil
}

// queueListen records LISTEN (on) or UNLISTEN of channel ("" with on
// false: UNLISTEN *) for the transaction's commit.
func (s *Session) queueListen(channel string, on bool) {
	s.notes.pendingListen = append(s.notes.pendingListen, listenOp{channel, on})
}

// queueNotify records a NOTIFY for the transaction's commit.
func (s *Session) queueNotify(channel, payload string) error {
	if err := checkChannel(channel); err != nil {
		return err
	}
	if len(payload) >= maxNotifyPayload {
		return pgerror.New(pgerrcode.InvalidParameterValue, "payload string too long")
	}
	n := pgwire.Notification{PID: s.pid, Channel: channel, Payload: payload}
	for _, p := range s.notes.pendingNotify {
		if p == n {
			return nil // PostgreSQL folds a transaction's duplicates
		}
	}
	s.notes.pendingNotify = append(s.notes.pendingNotify, n)
	return nil
}

// endTxnNotify applies the transaction's LISTEN/UNLISTEN and sends its
// notifications when it committed; a rollback forgets them.
func (s *Session) endTxnNotify(committed bool) {
	ops, ns := s.notes.pendingListen, s.notes.pendingNotify
	s.notes.pendingListen, s.notes.pendingNotify = nil, nil
	if !committed {
		return
	}
	h := &s.b.notify
	for _, op := range ops {
		switch {
		case op.on:
			if s.notes.listening == nil {
				s.notes.listening = map[string]bool{}
			}
			s.notes.listening[op.channel] = true
			h.listen(s, op.channel)
		case op.channel == "":
			for c := range s.notes.listening {
				h.unlisten(s, c)
			}
			s.notes.listening = nil
		default:
			delete(s.notes.listening, op.channel)
			h.unlisten(s, op.channel)
		}
	}
	if len(ns) > 0 {
		h.send(ns)
	}
}

// closeNotify stops the session's listening when it ends.
func (s *Session) closeNotify() {
	for c := range s.notes.listening {
		s.b.notify.unlisten(s, c)
	}
	s.notes.mu.Lock()
	s.notes.closed, s.notes.queue, s.notes.wake = true, nil, nil
	s.notes.queued.Store(false)
	s.notes.mu.Unlock()
}

// listeningChannels is pg_listening_channels().
func (s *Session) listeningChannels() []string {
	out := make([]string, 0, len(s.notes.listening))
	for c := range s.notes.listening {
		out = append(out, c)
	}
	return out
}
