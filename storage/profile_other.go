//go:build !linux

package storage

// blockDevice is Linux only: elsewhere auto means ssd.
func blockDevice(dir string) (dev string, ok bool, why string) {
	return "", false, "detecting a rotational disk needs Linux's sysfs"
}
