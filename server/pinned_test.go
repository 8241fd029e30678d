package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
)

// TestRetryPinned: the node's own start-up work repeats a transaction
// the clock refused as pinned (a slow save of its upper bound), and
// nothing else.
func TestRetryPinned(t *testing.T) {
	pinned := fmt.Errorf("bootstrap: %w: timestamp 1.0 was handed out while the clock could not pass 2", hlc.ErrPinned)
	other := errors.New("some other failure")
	cases := []struct {
		name      string
		errs      []error // fn's results in order; nil ends
		cancelled bool
		wantCalls int
		wantErr   error
	}{
		{name: "succeeds at once", errs: []error{nil}, wantCalls: 1},
		{name: "pinned twice then succeeds", errs: []error{pinned, pinned, nil}, wantCalls: 3},
		{name: "another error is not retried", errs: []error{other, nil}, wantCalls: 1, wantErr: other},
		{name: "pinned then another error", errs: []error{pinned, other, nil}, wantCalls: 2, wantErr: other},
		{name: "cancelled start stops retrying", errs: []error{pinned, nil}, cancelled: true, wantCalls: 1, wantErr: hlc.ErrPinned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			clock := hlc.NewClock(hlc.UnixNano, 0)
			if err := clock.EnsureUpperBound(&hlc.MemUpperBoundStore{}, 0); err != nil {
				t.Fatal(err)
			}
			calls := 0
			err := retryPinned(ctx, clock, func() error {
				err := tc.errs[calls]
				calls++
				return err
			})
			if calls != tc.wantCalls {
				t.Errorf("fn ran %d times, want %d", calls, tc.wantCalls)
			}
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Errorf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
}
