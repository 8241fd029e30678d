package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileFromSysfs reads the rotational flag from a fake sysfs tree:
// a whole disk, a partition (whose flag is its disk's), an SSD, a device
// without an entry, and a garbled flag.
func TestProfileFromSysfs(t *testing.T) {
	root := t.TempDir()
	mk := func(dir, rotational string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir, "queue"), 0o755); err != nil {
			t.Fatal(err)
		}
		if rotational != "" {
			if err := os.WriteFile(filepath.Join(root, dir, "queue", "rotational"), []byte(rotational+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	link := func(dev, target string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, "dev", "block"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, target), filepath.Join(root, "dev", "block", dev)); err != nil {
			t.Fatal(err)
		}
	}
	mk("devices/pci0/sda", "1")
	if err := os.MkdirAll(filepath.Join(root, "devices/pci0/sda/sda1"), 0o755); err != nil {
		t.Fatal(err)
	}
	mk("devices/pci0/nvme0n1", "0")
	mk("devices/virtual/block/weird", "x")
	mk("devices/pci0/virtio1/block/vda", "1")
	link("8:0", "devices/pci0/sda")
	link("8:1", "devices/pci0/sda/sda1")
	link("259:0", "devices/pci0/nvme0n1")
	link("7:9", "devices/virtual/block/weird")
	link("253:0", "devices/pci0/virtio1/block/vda")
	for _, c := range []struct {
		dev, want, why string
	}{
		{"8:0", ProfileHDD, "sda is rotational"},
		{"8:1", ProfileHDD, "sda is rotational"},
		{"259:0", ProfileSSD, "nvme0n1 is not rotational"},
		{"7:9", ProfileSSD, `holds "x"`},
		// A virtio disk (this project's VMs): hdd, as its flag says, with
		// a word on what the flag is worth.
		{"253:0", ProfileHDD, "vda is rotational (a virtual disk"},
		{"1:1", ProfileSSD, "no sysfs entry"},
	} {
		got, why := profileFromSysfs(root, c.dev)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: got %s (%s), want %s (%s)", c.dev, got, why, c.want, c.why)
		}
	}
}

func TestParseProfile(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"ssd", "ssd", ""}, {" HDD ", "hdd", ""}, {"object-store", "object-store", ""}, {"auto", "auto", ""},
		{"s3", "", `unknown storage profile "s3"`}, {"", "", "unknown storage profile"},
	} {
		got, err := ParseProfile(c.in)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseProfile(%q) = %q, %v; want %q, %q", c.in, got, err, c.want, c.err)
		}
	}
}

// TestDetectProfile runs detection on this machine's temporary directory:
// whatever the disk, the answer is one of the profiles and says why.
func TestDetectProfile(t *testing.T) {
	if p, why := DetectProfile(""); p != ProfileSSD || why == "" {
		t.Errorf("in memory: %s (%s)", p, why)
	}
	p, why := DetectProfile(t.TempDir())
	if (p != ProfileSSD && p != ProfileHDD) || why == "" {
		t.Errorf("temp dir: %s (%s)", p, why)
	}
	t.Logf("this machine's temp dir: %s (%s)", p, why)
}
