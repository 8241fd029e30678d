package session

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/pgwire"
)

// TestTakeNotificationsLockFree: pgwire asks the session for its
// notifications twice per ReadyForQuery; with none delivered since the
// last take, TakeNotifications answers without taking the queue's lock
// (notifyState.queued). Delivered notifications are taken once, in
// order, and a closed session's are dropped.
func TestTakeNotificationsLockFree(t *testing.T) {
	s := &Session{}
	n := func(p string) pgwire.Notification { return pgwire.Notification{Channel: "c", Payload: p} }
	for _, step := range []struct {
		name    string
		deliver []pgwire.Notification
		close   bool
		want    string
		locks   int64 // takes that took the lock
	}{
		{"empty", nil, false, "[]", 0},
		{"one delivery", []pgwire.Notification{n("a"), n("b")}, false, "[a b]", 1},
		{"taken already", nil, false, "[]", 0},
		{"again", []pgwire.Notification{n("c")}, false, "[c]", 1},
		{"closed", []pgwire.Notification{n("d")}, true, "[]", 0},
		{"after close", []pgwire.Notification{n("e")}, false, "[]", 0},
	} {
		if step.deliver != nil {
			s.notes.deliver(step.deliver)
		}
		if step.close {
			s.closeNotify()
		}
		before := notifyTakes.Load()
		var got []string
		for _, m := range s.TakeNotifications() {
			got = append(got, m.Payload)
		}
		if g := fmt.Sprint(got); g != step.want {
			t.Errorf("%s: took %s, want %s", step.name, g, step.want)
		}
		if l := notifyTakes.Load() - before; l != step.locks {
			t.Errorf("%s: %d takes under the lock, want %d", step.name, l, step.locks)
		}
	}
}
