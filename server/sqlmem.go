package server

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/rowcontainer"
)

// DefaultMaxDiskTempStorage is --max-disk-temp-storage's default, as
// CockroachDB's.
const DefaultMaxDiskTempStorage = 32 << 30

// tempDirName is the store's subdirectory for statements' temporary
// files (sql/rowcontainer); it is wiped when the node starts.
const tempDirName = "cairn-temp"

// sqlMemory makes the node's SQL memory budget and temporary storage
// from cfg. A node without a store dir spills into a directory of its
// own under the OS's temporary directory, removed at Stop (cleanup).
func sqlMemory(cfg Config) (mem *mon.Budget, temp *rowcontainer.TempStorage, cleanup func(), err error) {
	memLimit := cfg.MaxSQLMemory
	if memLimit == 0 {
		memLimit = mon.DefaultSQLMemory()
	}
	diskLimit := cfg.MaxDiskTempStorage
	if diskLimit == 0 {
		diskLimit = DefaultMaxDiskTempStorage
	}
	dir := filepath.Join(cfg.StoreDir, tempDirName)
	cleanup = func() {}
	if cfg.StoreDir == "" || cfg.FS != nil {
		// In memory (or on an injected filesystem): the OS's temporary
		// directory.
		if dir, err = os.MkdirTemp("", "cairn-temp-"); err != nil {
			return nil, nil, nil, fmt.Errorf("creating a temporary directory: %w", err)
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
	}
	if temp, err = rowcontainer.NewTempStorage(dir, diskLimit); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return mon.NewBudget("SQL memory", memLimit), temp, cleanup, nil
}
