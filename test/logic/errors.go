package logic

import "fmt"

// ParseError reports a malformed logic-test file: the format itself is
// wrong, before any SQL runs. Line is 1-based.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Failure is one record whose outcome differed from what the file expects.
// Line is the 1-based line of the record's directive.
type Failure struct {
	File string
	Line int
	Msg  string
}

func (f Failure) String() string {
	return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Msg)
}
