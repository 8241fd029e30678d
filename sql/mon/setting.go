package mon

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Memory settings in PostgreSQL's syntax (work_mem): an integer with an
// optional unit B, kB, MB, GB or TB (case-sensitive, as in PostgreSQL);
// no unit means kB.

// MinWorkMem and MaxWorkMemKB are work_mem's range (PostgreSQL's: 64kB to
// INT_MAX kB).
const (
	MinWorkMemKB = 64
	MaxWorkMemKB = math.MaxInt32
)

var memUnits = []struct {
	suffix string
	kb     float64
}{{"TB", 1 << 30}, {"GB", 1 << 20}, {"MB", 1 << 10}, {"kB", 1}, {"B", 1.0 / 1024}}

// ParseKB parses a memory setting into kB, rounding as PostgreSQL does
// (to the nearest kB). ok is false for text that is not a memory value;
// the caller owns the error message.
func ParseKB(v string) (kb int64, hint string, ok bool) {
	t := strings.TrimSpace(v)
	mult := 1.0
	for _, u := range memUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.kb
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || math.IsNaN(n) || math.IsInf(n, 0) {
		if t != "" && strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' }) > 0 {
			return 0, `Valid units for this parameter are "B", "kB", "MB", "GB", and "TB".`, false
		}
		return 0, "", false
	}
	f := math.Round(n * mult)
	if f > math.MaxInt64/2 || f < math.MinInt64/2 {
		return math.MaxInt64 / 2, "", true
	}
	return int64(f), "", true
}

// FormatKB prints kB as PostgreSQL's SHOW does: the largest unit that
// divides the value.
func FormatKB(kb int64) string {
	switch {
	case kb != 0 && kb%(1<<30) == 0:
		return fmt.Sprintf("%dTB", kb>>30)
	case kb != 0 && kb%(1<<20) == 0:
		return fmt.Sprintf("%dGB", kb>>20)
	case kb != 0 && kb%(1<<10) == 0:
		return fmt.Sprintf("%dMB", kb>>10)
	}
	return fmt.Sprintf("%dkB", kb)
}

// SystemMemory is the machine's RAM in bytes (MemTotal of
// /proc/meminfo), or 0 when it cannot be read.
func SystemMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// DefaultSQLMemory is --max-sql-memory's default: a quarter of RAM (1 GiB
// when RAM is unknown).
func DefaultSQLMemory() int64 {
	if m := SystemMemory(); m > 0 {
		return m / 4
	}
	return 1 << 30
}
