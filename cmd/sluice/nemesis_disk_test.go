package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nemDisk is one nemesis process's own disk: an ext4 file system on a
// loop device over a sparse image file. The file system is mounted only
// inside the process's mount namespace (its command mounts it, then
// execs sluice), so when the process dies nothing else holds it: the
// next start mounts it afresh and ext4 replays its journal, as after a
// reboot. What the nemesis does to it:
//
//   - power cut: the process is killed -9 and the file system shut down
//     without flushing its journal (EXT4_IOC_SHUTDOWN, NOLOGFLUSH, the
//     ioctl file system tests use to simulate a crash): every write the
//     page cache held and had not written back, and every journal
//     transaction not yet committed, is gone. What the disk had received
//     stays. So what survives is what a power cut leaves: data up to each
//     file's last fsync (and whatever writeback had flushed by chance),
//     directory entries created, renamed or removed since the last
//     journal commit undone unless an fsync committed them. A torn sector
//     is not modelled (ext4 on a loop device writes whole blocks).
//   - full: a preallocated ballast file takes every free block;
//   - slow: the block layer throttles writes to the loop device
//     (cgroup v1 blkio.throttle), so every fsync waits.
type nemDisk struct {
	name   string
	img    string
	loop   string // /dev/loopN
	majMin string
	mnt    string // the mount point (an empty directory outside the process's namespace)
	mkfs   string
}

// nemDiskSize is each image's size: sparse, so only what is written costs.
const nemDiskSize = 2 << 30

// newNemDisk makes name's image, file system and loop device. It returns
// nil with the reason when this machine cannot (no loop devices, no
// mkfs.ext4, no cgroup v1 blkio).
func newNemDisk(t *testing.T, dir, name string) (*nemDisk, string) {
	t.Helper()
	mkfs, err := lookSbin("mkfs.ext4")
	if err != nil {
		return nil, err.Error()
	}
	losetup, err := lookSbin("losetup")
	if err != nil {
		return nil, err.Error()
	}
	d := &nemDisk{name: name, img: filepath.Join(dir, name+".img"), mnt: filepath.Join(dir, name), mkfs: mkfs}
	if err := os.MkdirAll(d.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(d.img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(nemDiskSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// -m 0: no blocks reserved for root (sluice runs as root here, so a
	// reserve would let it write past "full").
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", d.img).CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("mkfs.ext4: %v: %s", err, out)
	}
	out, err := exec.Command(losetup, "-f", "--show", d.img).CombinedOutput()
	if err != nil {
		return nil, fmt.Sprintf("losetup: %v: %s", err, out)
	}
	d.loop = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		d.throttle(t, false)
		d.waitReleased(t)
		if out, err := exec.Command(losetup, "-d", d.loop).CombinedOutput(); err != nil {
			t.Logf("losetup -d %s: %v: %s", d.loop, err, out)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(d.loop, &st); err != nil {
		t.Fatal(err)
	}
	d.majMin = fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	if _, err := os.Stat(blkioWriteIOPS); err != nil {
		return nil, "no cgroup v1 blkio throttle (" + err.Error() + ")"
	}
	return d, ""
}

func lookSbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
			return filepath.Join(dir, name), nil
		}
	}
	return "", fmt.Errorf("%s is not installed", name)
}

// dataDir is the process's data directory (inside the mount).
func (d *nemDisk) dataDir() string { return filepath.Join(d.mnt, "data") }

// prefix wraps the process's command (prefix: its network namespace):
// mount the file system in the process's own mount namespace, then exec
// sluice, so that the pid stays sluice's.
func (d *nemDisk) prefix(prefix []string) []string {
	return append(append([]string{}, prefix...), "sh", "-c", `mount -t ext4 "$1" "$2" && shift 2 && exec "$@"`, "sh", d.loop, d.mnt)
}

// ext4's sysfs/procfs entry exists while a file system of the device is
// mounted anywhere (in any namespace, or held by an open file).
func (d *nemDisk) mounted() bool {
	_, err := os.Stat("/proc/fs/ext4/" + filepath.Base(d.loop))
	return err == nil
}

// waitReleased waits until no mount of the device is left (a dead
// process's namespace is torn down shortly after it exits).
func (d *nemDisk) waitReleased(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for d.mounted() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the file system on %s still mounted 20 s after its process died", d.name, d.loop)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// powerCut kills p -9 and shuts its file system down without flushing the
// journal, then waits until the file system is gone. It returns what the
// cut took: files, directories and bytes that the page cache held and the
// disk, once its journal is replayed, does not.
func (d *nemDisk) powerCut(t *testing.T, p *proc) string {
	t.Helper()
	if p.cmd == nil || p.cmd.Process == nil {
		t.Fatalf("%s: power cut of a process that is not running", d.name)
	}
	// A handle on the file system, through the process's namespace, so
	// that it outlives the process.
	fsys, err := os.Open(fmt.Sprintf("/proc/%d/root%s", p.cmd.Process.Pid, d.mnt))
	if err != nil {
		t.Fatalf("%s: opening its file system: %v", d.name, err)
	}
	p.kill()
	before := readTree(fmt.Sprintf("/proc/self/fd/%d/data", fsys.Fd()))
	if err := unix.IoctlSetPointerInt(int(fsys.Fd()), ext4IocShutdown, ext4GoingFlagsNoLogFlush); err != nil {
		fsys.Close()
		t.Fatalf("%s: EXT4_IOC_SHUTDOWN: %v", d.name, err)
	}
	fsys.Close()
	d.waitReleased(t)
	// Mount it once to see what survived (the journal replays now, as it
	// would at the process's next mount), then let go of it. The mount is
	// made by a child in a mount namespace of its own: mounted in this
	// process's namespace, it would be copied into the namespace of any
	// process started meanwhile (ip netns exec makes one from it), which
	// would then hold the file system for as long as it lives.
	after := d.look(t)
	d.waitReleased(t)
	gone, shorter, changed, lost := 0, 0, 0, int64(0)
	for path, b := range before {
		a, ok := after[path]
		switch {
		case !ok:
			gone++
			lost += int64(len(b))
			continue
		case len(a) < len(b):
			shorter++
			lost += int64(len(b) - len(a))
		}
		// Blocks of what is left that the page cache held newer (bbolt
		// and index files are overwritten in place).
		diff := false
		for off := 0; off < min(len(a), len(b)); off += 4096 {
			end := min(off+4096, len(a), len(b))
			if string(a[off:end]) != string(b[off:end]) {
				diff = true
				lost += int64(end - off)
			}
		}
		if diff {
			changed++
		}
	}
	return fmt.Sprintf("the cut undid %d of %d files and directories, shortened %d files and reverted blocks of %d; %d bytes in all", gone, len(before), shorter, changed, lost)
}

// readTree is the contents of every file, and every directory (empty),
// under root.
// look mounts the file system in a child's own mount namespace, reads its
// data directory through /proc/<child>/root, and ends the child, which
// takes the mount with it.
func (d *nemDisk) look(t *testing.T) map[string][]byte {
	t.Helper()
	look := d.mnt + ".look"
	if err := os.MkdirAll(look, 0o755); err != nil {
		t.Fatal(err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c",
		`mount -t ext4 "$1" "$2" && echo mounted && exec sleep 600`, "sh", d.loop, look)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "mounted" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%s: mounting %s after the power cut: %s", d.name, d.loop, stderr.String())
	}
	return readTree(fmt.Sprintf("/proc/%d/root%s/data", cmd.Process.Pid, look))
}

func readTree(root string) map[string][]byte {
	out := map[string][]byte{}
	filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == root {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if e.IsDir() {
			out[rel] = nil
			return nil
		}
		if b, err := os.ReadFile(path); err == nil {
			out[rel] = b
		}
		return nil
	})
	return out
}

// fill takes every free block of p's file system with a preallocated
// ballast file (through p's namespace; p must be running) and returns its
// path there and how many bytes are left free.
func (d *nemDisk) fill(t *testing.T, p *proc) (string, int64) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/root%s/ballast", p.cmd.Process.Pid, d.mnt)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("%s: ballast: %v", d.name, err)
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	// One large extent, then smaller ones until none fits.
	off := int64(0)
	for chunk := int64(st.Bfree) * st.Bsize; chunk >= 4096; {
		if err := unix.Fallocate(int(f.Fd()), 0, off, chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				chunk /= 2
				continue
			}
			t.Fatalf("%s: fallocate: %v", d.name, err)
		}
		off += chunk
	}
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return path, int64(st.Bavail) * st.Bsize // Bfree less ext4's reserve for its own metadata
}

// fsyncTime writes 4 KiB to a new file on p's file system, fsyncs it and
// returns how long the fsync took (what a slow disk does to the broker).
func (d *nemDisk) fsyncTime(t *testing.T, p *proc) time.Duration {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/root%s/probe", p.cmd.Process.Pid, d.mnt)
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("%s: probe: %v", d.name, err)
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatalf("%s: probe: %v", d.name, err)
	}
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatalf("%s: probe: %v", d.name, err)
	}
	return time.Since(start)
}

// free returns the ballast's space (path from fill; p still running).
func (d *nemDisk) free(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatalf("%s: removing the ballast: %v (did the process exit on a full disk?)", d.name, err)
	}
}

// From the kernel's ext4.h: EXT4_IOC_SHUTDOWN is _IOR('X', 125, __u32);
// NOLOGFLUSH shuts down without writing the journal or the page cache.
const (
	ext4IocShutdown          = 0x8004587d
	ext4GoingFlagsNoLogFlush = 0x2
)

const blkioWriteIOPS = "/sys/fs/cgroup/blkio/blkio.throttle.write_iops_device"

// nemSlowIOPS is the slow disk's write rate: a few hundred ms per fsync
// (an fsync is several writes: data, journal, commit record).
const nemSlowIOPS = 20

// throttle slows (on) or restores the device's writes, for every process
// (the rule is set on the root blkio group, so the kernel's writeback
// threads are slowed too, like a slow disk would be).
func (d *nemDisk) throttle(t *testing.T, on bool) {
	t.Helper()
	rate := 0 // 0 removes the rule
	if on {
		rate = nemSlowIOPS
	}
	if err := os.WriteFile(blkioWriteIOPS, []byte(fmt.Sprintf("%s %d\n", d.majMin, rate)), 0o644); err != nil && on {
		t.Fatalf("%s: throttling %s: %v", d.name, d.loop, err)
	}
}
