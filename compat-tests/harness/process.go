package harness

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one run after another of the sluice binary with its stderr
// appended to one log file: what a single-node Broker and a cluster Node
// share. It tells the exits the harness asked for from crashes.
type process struct {
	logPath string
	logFile *os.File

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited; nil before the first start
	werr error         // the current process's Wait error, valid after done
	// expectExit is set while the harness itself stops or kills the
	// process, so that an exit is not reported as a crash.
	expectExit bool
	crashed    []string
}

func (p *process) openLog(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.logPath, p.logFile = path, f
	return nil
}

// start runs the binary with args (env added to the environment) and
// returns once it has started.
func (p *process) start(args, env []string) error {
	fmt.Fprintf(p.logFile, "=== harness: starting %s %s\n", binPath, strings.Join(args, " "))
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = p.logFile, p.logFile
	// If the test binary dies (e.g. a -timeout panic), take the process with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.expectExit, p.werr = cmd, done, false, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.werr = err
		if !p.expectExit {
			p.crashed = append(p.crashed, fmt.Sprintf("pid %d exited on its own: %v", cmd.Process.Pid, err))
		}
		p.mu.Unlock()
		fmt.Fprintf(p.logFile, "=== harness: pid %d exited: %v\n", cmd.Process.Pid, err)
		close(done)
	}()
	return nil
}

// waitReady polls the admin address's /readyz until it answers 200, the
// process exits, or readyTimeout passes.
func (p *process) waitReady(adminAddr string) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("exited before it was ready (last probe: %s)", last)
		default:
		}
		resp, err := client.Get("http://" + adminAddr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = "readyz: " + resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v (last: %s)", readyTimeout, last)
}

// Running reports whether the current process is alive.
func (p *process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Pid returns the current process's id (0 before the first start).
func (p *process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() {
	p.mu.Lock()
	p.expectExit = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	fmt.Fprintf(p.logFile, "=== harness: SIGKILL pid %d\n", cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop sends SIGTERM and waits for a clean exit (status 0), killing the
// process after stopTimeout.
func (p *process) stop() error {
	p.mu.Lock()
	p.expectExit = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if !p.Running() {
		return errors.New("not running")
	}
	fmt.Fprintf(p.logFile, "=== harness: SIGTERM pid %d\n", cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("did not exit within %v of SIGTERM; killed it", stopTimeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr != nil {
		return fmt.Errorf("exited uncleanly after SIGTERM: %w", p.werr)
	}
	return nil
}

// crashes returns the exits the harness did not ask for.
func (p *process) crashes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.crashed...)
}

// alarm returns the first line of the log that reports a crash or a race,
// or "".
func (p *process) alarm() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, a := range logAlarms {
			if strings.HasPrefix(line, a) {
				return line
			}
		}
	}
	return ""
}

// LogTail returns up to the last n bytes of the process's stderr so far.
func (p *process) LogTail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}
