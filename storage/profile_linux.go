package storage

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// blockDevice returns the "major:minor" of the device holding dir.
func blockDevice(dir string) (dev string, ok bool, why string) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", false, fmt.Sprintf("stat %s: %v", dir, err)
	}
	maj, min := unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev))
	if maj == 0 {
		// Anonymous devices: tmpfs, overlay, other virtual filesystems.
		return "", false, fmt.Sprintf("%s is on no block device (device %d:%d)", dir, maj, min)
	}
	return fmt.Sprintf("%d:%d", maj, min), true, ""
}
