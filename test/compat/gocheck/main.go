// Command gocheck runs pgx and GORM against a Cairn node for `make
// compat` (test/compat/run.sh): `gocheck pgx URL` and `gocheck gorm URL`.
// It is a module of its own so that GORM, which Cairn does not use, stays
// out of Cairn's go.mod; the Go module proxy fetches both. Every step
// asserts what it read back; the exit status is 1 on the first failure.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gocheck pgx|gorm URL")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "pgx":
		err = checkPgx(os.Args[2])
	case "gorm":
		err = checkGorm(os.Args[2])
	default:
		err = fmt.Errorf("unknown check %q", os.Args[1])
	}
	if err != nil {
		fmt.Printf("%s: FAILED: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	fmt.Printf("%s: all checks ok\n", os.Args[1])
}

func step(check, name string) { fmt.Printf("%s: %s\n", check, name) }
