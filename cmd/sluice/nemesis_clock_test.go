package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A clock jump of one process. Linux has no wall clock per process (time
// namespaces shift the monotonic and boot clocks only), setting the
// machine's clock would jump every process on it, and Go reads the clock
// through the vDSO, so an LD_PRELOAD fake clock does not reach it. So the
// nemesis builds a second sluice binary whose standard library time
// package is patched (go build -overlay; sluice's own code is unchanged):
// time.Now adds an offset to the wall clock reading and leaves the
// monotonic reading alone, which is what a settimeofday or an NTP step
// does to a running process. The offset comes from a file named by
// SLUICE_TEST_CLOCK_FILE, read every 20 ms; the process writes the
// offset it applied to the same path plus ".applied". What the jump does
// not reach: times the kernel stamps (file modification times, TCP
// timestamps), which keep the machine's clock.

// nemClockPatch is appended to time.Now's first line in the patched
// time package.
const (
	nemClockNowLine  = "\tsec, nsec, mono := runtimeNow()\n"
	nemClockNowPatch = "\tsec, nsec, mono := runtimeNow()\n\tsec, nsec = sluiceJumpWall(sec, nsec)\n"
)

// nemClockFile is added to the time package.
const nemClockFile = `package time

import (
	"sync/atomic"
	"syscall"
)

// sluiceWallOffset is added to every wall clock reading (nanoseconds).
var sluiceWallOffset atomic.Int64

func sluiceJumpWall(sec int64, nsec int32) (int64, int32) {
	off := sluiceWallOffset.Load()
	if off == 0 {
		return sec, nsec
	}
	t := int64(nsec) + off%1e9
	sec += off / 1e9
	if t < 0 {
		t += 1e9
		sec--
	} else if t >= 1e9 {
		t -= 1e9
		sec++
	}
	return sec, int32(t)
}

func init() {
	path, ok := syscall.Getenv("SLUICE_TEST_CLOCK_FILE")
	if !ok || path == "" {
		return
	}
	go func() {
		buf := make([]byte, 64)
		applied := int64(0)
		for {
			if fd, err := syscall.Open(path, syscall.O_RDONLY, 0); err == nil {
				n, _ := syscall.Read(fd, buf)
				syscall.Close(fd)
				if v, ok := sluiceParseInt(buf[:max(n, 0)]); ok {
					sluiceWallOffset.Store(v)
					if v != applied {
						applied = v
						if fd, err := syscall.Open(path+".applied", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, 0o644); err == nil {
							syscall.Write(fd, []byte(sluiceFormatInt(v)))
							syscall.Close(fd)
						}
					}
				}
			}
			Sleep(20 * Millisecond)
		}
	}()
}

func sluiceParseInt(b []byte) (int64, bool) {
	neg, v, digits := false, int64(0), 0
	for i, c := range b {
		switch {
		case c == '-' && i == 0:
			neg = true
		case c >= '0' && c <= '9':
			v = v*10 + int64(c-'0')
			digits++
		case c == '\n':
		default:
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, digits > 0
}

func sluiceFormatInt(v int64) string {
	if v == 0 {
		return "0"
	}
	neg := v < 0
	if neg {
		v = -v
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}
`

// buildClockBinary builds sluice with the patched time package into dir.
func buildClockBinary(t *testing.T, dir string) (string, error) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src", "time")
	orig, err := os.ReadFile(filepath.Join(src, "time.go"))
	if err != nil {
		return "", err
	}
	if strings.Count(string(orig), nemClockNowLine) != 1 {
		return "", fmt.Errorf("time.Now of this Go release does not start with %q", nemClockNowLine)
	}
	patched := filepath.Join(dir, "time.go")
	added := filepath.Join(dir, "sluice_clockjump.go")
	if err := os.WriteFile(patched, []byte(strings.Replace(string(orig), nemClockNowLine, nemClockNowPatch, 1)), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(added, []byte(nemClockFile), 0o644); err != nil {
		return "", err
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(src, "time.go"): patched, filepath.Join(src, "sluice_clockjump.go"): added}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "sluice-clock")
	start := time.Now()
	if out, err := exec.Command("go", "build", "-overlay", ov, "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -overlay: %v: %s", err, out)
	}
	t.Logf("built sluice with a settable wall clock in %v", time.Since(start).Round(time.Second))
	return bin, nil
}

// nemClock is one process's clock offset file.
type nemClock struct{ path string }

// jump sets the process's wall clock offset and waits until the process
// applied it.
func (c nemClock) jump(t *testing.T, off time.Duration) {
	t.Helper()
	v := strconv.FormatInt(int64(off), 10)
	if err := os.WriteFile(c.path+".tmp", []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(c.path+".tmp", c.path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(c.path + ".applied"); err == nil && string(b) == v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the process did not apply the clock offset %v within 10 s", c.path, off)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
