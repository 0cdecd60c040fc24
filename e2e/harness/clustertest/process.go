package clustertest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is one of the project's binaries run as a child of the test: in
// a process group of its own, killed with the test binary, its output
// appended to Log across restarts, and started with the environment less
// the HB_ variables (which it would read as configuration overrides).
type Process struct {
	Kind, Name string   // for messages: "server", "a1"
	Bin        string   // path of the binary (see Binary)
	Args       []string // its arguments, the same at every start
	Ready      string   // host:port whose /readyz must answer 200 before a start is done; "" for none
	Log        string   // where its output goes; StartProcess picks a file when empty
	Admin      string   // host:port of its admin listener (metrics, health, pprof); "" for none
	Env        []string // more environment variables, KEY=VALUE

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess starts p and waits until it is ready. It is killed when the
// test ends, and if the test failed the end of its log is printed.
// Problems fail the test.
func StartProcess(t testing.TB, p *Process) *Process {
	t.Helper()
	if p.Log == "" {
		p.Log = filepath.Join(t.TempDir(), p.Kind+"-"+p.Name+".log")
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			p.logTail(t)
		}
	})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Start launches p and waits until it is ready.
func (p *Process) Start() error {
	if err := p.launch(); err != nil {
		return err
	}
	return p.waitReady()
}

// Restart kills p if it still runs, starts it again with its arguments and
// waits until it is ready.
func (p *Process) Restart() error {
	if err := p.Kill(); err != nil {
		return err
	}
	return p.Start()
}

// Kill sends SIGKILL to p's process group (kill -9) and waits until p is
// gone.
func (p *Process) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("clustertest: %s %s survived SIGKILL", p.Kind, p.Name)
	}
}

// launch starts p in its own process group, appending to its log.
func (p *Process) launch() error {
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s start: %s %s\n", time.Now().Format(time.RFC3339Nano), filepath.Base(p.Bin), strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(Environ(), p.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("clustertest: start %s %s: %w", p.Kind, p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		fmt.Fprintf(f, "=== %s exit: %v\n", time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// Environ is the test's environment without the HB_ variables, which the
// project's binaries would read as configuration overrides.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HB_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitReady waits until p answers /readyz (if it serves HTTP) and checks it
// has not exited.
func (p *Process) waitReady() error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-done:
			return fmt.Errorf("clustertest: %s %s exited while starting:\n%s", p.Kind, p.Name, tail(p.Log, 30))
		default:
		}
		if p.Ready == "" {
			return nil
		}
		if resp, err := hc.Get("http://" + p.Ready + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clustertest: %s %s not ready on %s after 30s:\n%s", p.Kind, p.Name, p.Ready, tail(p.Log, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail prints the end of p's log, and the first of its error lines
// wherever they are: a 5xx a client saw is logged at error level with its
// request ID, often long before the end of a busy process's log.
func (p *Process) logTail(t testing.TB) {
	last, errs, nerrs := scanLog(p.Log, 40, 20)
	if nerrs > 0 {
		t.Logf("---- %s %s: %d error lines in %s, the first %d:\n%s", p.Kind, p.Name, nerrs, p.Log, len(errs), strings.Join(errs, "\n"))
	}
	t.Logf("---- %s %s: last lines of %s\n%s", p.Kind, p.Name, p.Log, strings.Join(last, "\n"))
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	last, _, _ := scanLog(path, n, 0)
	return strings.Join(last, "\n")
}

// scanLog reads the log at path: its last n lines, its first m lines at
// error level (zap's JSON) and how many there are in all.
func scanLog(path string, n, m int) (last, errs []string, nerrs int) {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}, nil, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"dpanic"`) || strings.Contains(line, `"level":"fatal"`) {
			if nerrs++; len(errs) < m {
				errs = append(errs, line)
			}
		}
		if last = append(last, line); len(last) > n {
			last = last[1:]
		}
	}
	return last, errs, nerrs
}
