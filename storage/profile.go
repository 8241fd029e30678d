package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Storage profiles name the kind of device a store lives on. The SQL
// planner prices reads by them (sql/opt's Costs of the same names) and
// storage/simfs can make a fast disk behave like one of them.
const (
	// ProfileSSD is a local solid-state drive: random reads cost about
	// what sequential ones do.
	ProfileSSD = "ssd"
	// ProfileHDD is a spinning disk: a read that is not adjacent to the
	// previous one pays a ~10 ms seek.
	ProfileHDD = "hdd"
	// ProfileObjectStore is remote object storage (S3 and the like):
	// every request pays a network round trip, and bandwidth is limited.
	ProfileObjectStore = "object-store"
	// ProfileAuto asks DetectProfile: hdd when the store's block device
	// is rotational, ssd otherwise.
	ProfileAuto = "auto"
)

// Profiles lists the profiles a store may have, in the order flags and
// errors print them.
var Profiles = []string{ProfileSSD, ProfileHDD, ProfileObjectStore}

// ParseProfile checks a --store-profile value: one of Profiles or auto.
func ParseProfile(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == ProfileAuto {
		return s, nil
	}
	for _, p := range Profiles {
		if s == p {
			return s, nil
		}
	}
	return "", fmt.Errorf("unknown storage profile %q: want %s or %s", s, strings.Join(Profiles, ", "), ProfileAuto)
}

// DetectProfile is the auto profile of a store in dir: hdd when the block
// device holding dir reports itself rotational, ssd otherwise. why says
// what the decision rests on, for the node's log. A store in memory (dir
// ""), a filesystem on no block device (tmpfs, overlay) and any system
// but Linux are ssd: nothing says otherwise, and guessing a slow disk
// would trade fast lookups for full reads on every join.
func DetectProfile(dir string) (profile, why string) {
	if dir == "" {
		return ProfileSSD, "the store is in memory"
	}
	dev, ok, why := blockDevice(dir)
	if !ok {
		return ProfileSSD, why
	}
	return profileFromSysfs("/sys", dev)
}

// profileFromSysfs reads the rotational flag of block device dev
// ("major:minor") under sysfs (the root of a sysfs tree; tests pass a fake
// one). /sys/dev/block/M:m links to the device's directory; a partition's
// directory has no queue/ of its own, its disk's (the parent) does.
func profileFromSysfs(sysfs, dev string) (profile, why string) {
	link := filepath.Join(sysfs, "dev", "block", dev)
	devDir, err := filepath.EvalSymlinks(link)
	if err != nil {
		return ProfileSSD, fmt.Sprintf("device %s has no sysfs entry (%v)", dev, err)
	}
	for _, d := range []string{devDir, filepath.Dir(devDir)} {
		b, err := os.ReadFile(filepath.Join(d, "queue", "rotational"))
		if err != nil {
			continue
		}
		name := filepath.Base(d)
		switch strings.TrimSpace(string(b)) {
		case "1":
			if virtualDisk(name) {
				return ProfileHDD, fmt.Sprintf("%s is rotational (a virtual disk, whose flag need not say what backs it: --store-profile ssd if an SSD does)", name)
			}
			return ProfileHDD, fmt.Sprintf("%s is rotational", name)
		case "0":
			return ProfileSSD, fmt.Sprintf("%s is not rotational", name)
		default:
			return ProfileSSD, fmt.Sprintf("%s/queue/rotational holds %q", name, strings.TrimSpace(string(b)))
		}
	}
	return ProfileSSD, fmt.Sprintf("device %s (%s) has no queue/rotational", dev, devDir)
}

// virtualDisk reports whether a block device's name is a hypervisor's
// paravirtual disk (virtio vdX, Xen xvdX): virtio-blk reports rotational
// unless the host says otherwise, whatever the disk behind it, so auto
// plans such a VM's store as hdd. The ready line says so, and the
// operator decides (docs/sql.md, "Storage profiles").
func virtualDisk(name string) bool {
	return strings.HasPrefix(name, "vd") || strings.HasPrefix(name, "xvd")
}
