// Package benchflag parses the options the bench/ programs share beyond
// what package flag does: comma-separated counts (-rows 1000000,3000000,
// -at 0,1000, -tables 24,64, -scaling 1,3,5) and -cpuprofile.
//
// It owns no flags itself: each program declares its own (names,
// defaults and help stay where a reader of the program looks) and hands
// the values here.
//
// Invariants:
//  1. A list is parsed whole or not at all: the first bad element fails
//     it, and the error names the flag and the element.
//  2. Elements keep their order and repeats; a program that wants them
//     sorted sorts them.
package benchflag

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// Counts parses list, comma-separated integers each at least min (spaces
// around an element are allowed), the value of the flag -name.
func Counts[T int | int64](name, list string, min T) ([]T, error) {
	var out []T
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || T(n) < min || int64(T(n)) != n {
			return nil, fmt.Errorf("-%s %q: %q is not a count of at least %d", name, list, f, min)
		}
		out = append(out, T(n))
	}
	return out, nil
}

// CPUProfile starts a CPU profile of this process into path and returns
// the function that stops it and closes the file; with path "" it does
// nothing.
func CPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
