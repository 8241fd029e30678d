package hlc

import (
	"fmt"
	"time"
)

// ClockOffsetError is returned by Clock.Update when a remote timestamp is
// further ahead of the local physical clock than the maximum offset allows.
// It means some node's clock is broken (or this one is): accepting the
// timestamp would drag this node's clock into the future and break the
// uncertainty bound every read relies on, so the clock is left unchanged.
type ClockOffsetError struct {
	// Remote is the rejected timestamp.
	Remote Timestamp
	// Physical is the local physical time (Unix nanos, including any test
	// offset) it was compared with.
	Physical int64
	// MaxOffset is the configured maximum clock offset.
	MaxOffset time.Duration
}

func (e *ClockOffsetError) Error() string {
	return fmt.Sprintf("hlc: remote timestamp %s is %s ahead of local physical clock %d, beyond the maximum clock offset %s",
		e.Remote, time.Duration(e.Remote.WallTime-e.Physical), e.Physical, e.MaxOffset)
}
