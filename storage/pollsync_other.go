//go:build !(linux && (amd64 || arm64))

package storage

import "github.com/cockroachdb/pebble/v2/vfs"

// Linux AIO's structures are laid out here for little-endian 64-bit
// Linux only; elsewhere WAL files sync as Pebble syncs them.
func pollSyncSupported() bool { return false }

func newPollSyncFile(f vfs.File) vfs.File { return f }
