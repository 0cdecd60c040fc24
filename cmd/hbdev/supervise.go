package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pidOf reads a pid file; 0 when there is none or it holds no pid.
func pidOf(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 {
		return 0
	}
	return p
}

// exists: a process with pid p exists (kill -0), zombies included.
func exists(p int) bool { return syscall.Kill(p, 0) == nil }

// zombie: process p has exited and not been reaped.
func zombie(p int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and
	// may hold anything, spaces and parentheses included.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// dying: process p exited, or was killed and is still exiting (SIGKILL
// pending or being delivered, or some of its threads already gone).
func dying(p int) bool {
	if zombie(p) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "ShdPnd" && k != "SigPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// gone: process p is no more, or exited and waits for its parent only.
func gone(p int) bool { return !exists(p) || zombie(p) }

// alive: the process of pid file runs and is not dying. A process killed
// with kill -9 lingers a while (a MariaDB tearing down its buffer pool, a
// zombie nobody has reaped yet): alive waits until it is gone (up to 30 s)
// and says no, so that whoever starts a new one does not find the old one
// in its way.
func alive(file string) bool {
	p := pidOf(file)
	if p == 0 || !exists(p) {
		return false
	}
	if !dying(p) {
		return true
	}
	for range 300 {
		if gone(p) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// running: the process of pid file is alive and listens on port in this
// network namespace. One alive that does not (a test instance left
// running in another network namespace by a make test that was killed:
// nothing here would reach it, and tests would fail to connect) is stopped.
func running(file, port string) bool {
	if !alive(file) {
		return false
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		return true
	}
	fmt.Fprintf(os.Stderr, "%s: pid %d does not listen on 127.0.0.1:%s here (another network namespace?): stopping it\n", file, pidOf(file), port)
	stop(file)
	return false
}

// stop stops the process of pid file: TERM, up to 30 s for it to go, then
// KILL and wait until it is gone; the pid file is removed.
func stop(file string) {
	defer os.Remove(file)
	if !alive(file) {
		return
	}
	p := pidOf(file)
	_ = syscall.Kill(p, syscall.SIGTERM)
	for i := 0; i < 300 && alive(file); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(file) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	alive(file) // waits for the killed process to be gone
}

// waitHTTP waits up to 10 s until url answers with a success.
func waitHTTP(url string) error {
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				return nil
			}
		}
	}
	return fmt.Errorf("%s did not answer", url)
}

// process is what start and supervise are told: the pid files'
// directory, the process's kind and name, and its command line.
type process struct {
	run, kind, name string
	argv            []string
}

func parseProcess(name string, args []string) (process, error) {
	return parseNamed(name, args, 3, "want KIND NAME CMD...")
}

// parseNamed parses -run and at least least words: KIND NAME and the
// rest (argv).
func parseNamed(name string, args []string, least int, want string) (process, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	run := fs.String("run", ".run", "directory of the pid files and logs")
	if err := fs.Parse(args); err != nil {
		return process{}, err
	}
	if fs.NArg() < least {
		return process{}, errors.New(want)
	}
	return process{run: *run, kind: fs.Arg(0), name: fs.Arg(1), argv: fs.Args()[2:]}, nil
}

func (p process) pidFile() string    { return filepath.Join(p.run, p.kind+"-"+p.name+".pid") }
func (p process) supPidFile() string { return filepath.Join(p.run, "sup-"+p.kind+"-"+p.name+".pid") }
func (p process) logFile() string    { return filepath.Join(p.run, p.kind+"-"+p.name+".log") }
func (p process) argsFile() string   { return filepath.Join(p.run, p.kind+"-"+p.name+".args") }

// start runs a project binary in the background under a supervisor that
// starts it again whenever it exits (see supervise), in a session of its
// own (make run's Ctrl-C reaches only dev.sh, which stops everything with
// make down): the binary's pid is in RUN/KIND-NAME.pid, its supervisor's
// in RUN/sup-KIND-NAME.pid, both log to RUN/KIND-NAME.log. Nothing is
// started when the supervisor already runs.
func start(args []string) error {
	p, err := parseProcess("start", args)
	if err != nil {
		return err
	}
	if alive(p.supPidFile()) {
		return nil
	}
	os.Remove(p.argsFile()) // a new supervisor runs CMD as given (see restartWith)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(p.logFile(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(self, append([]string{"supervise", "-run", p.run, p.kind, p.name}, p.argv...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(p.supPidFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// supervise runs CMD with its pid in RUN/KIND-NAME.pid and runs it again
// whenever it exits, however (kill -9 included): a second later, or up to
// 5 s later while it keeps dying within 10 s of its start. Each exit and
// start is a line in the log ("supervisor: ..."). TERM or INT (make down)
// stops the child (TERM, then KILL after 30 s) and then the supervisor. A
// child already running under the pid file (started before the
// supervisor) is waited for, not doubled.
func supervise(args []string) error {
	p, err := parseProcess("supervise", args)
	if err != nil {
		return err
	}
	say := func(format string, a ...any) {
		fmt.Printf("supervisor: %s %s %s: %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), p.kind, p.name, fmt.Sprintf(format, a...))
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	child := 0
	var exited chan struct{}
	finish := func() error {
		signal.Stop(sig)
		if child != 0 && !gone(child) {
			say("stopping pid %d", child)
			_ = syscall.Kill(child, syscall.SIGTERM)
			for i := 0; i < 300 && !gone(child); i++ {
				time.Sleep(100 * time.Millisecond)
			}
			_ = syscall.Kill(child, syscall.SIGKILL)
			if exited != nil {
				<-exited
			}
		}
		os.Remove(p.pidFile())
		say("stopped")
		return nil
	}
	if alive(p.pidFile()) {
		child = pidOf(p.pidFile())
		say("waiting for pid %d, started before its supervisor", child)
		for !gone(child) {
			select {
			case <-sig:
				return finish()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	delay, n := time.Second, 0
	for {
		began := time.Now()
		argv := append(slices.Clip(p.argv), p.extra()...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			say("cannot start %s: %v", p.argv[0], err)
		} else {
			child = cmd.Process.Pid
			if err := os.WriteFile(p.pidFile(), []byte(strconv.Itoa(child)+"\n"), 0o644); err != nil {
				say("pid file: %v", err)
			}
			n++
			say("started pid %d (start %d)%s", child, n, withExtra(argv[len(p.argv):]))
			exited = make(chan struct{})
			var rc int
			go func(done chan struct{}) {
				rc = status(cmd.Wait(), cmd.ProcessState)
				close(done)
			}(exited)
			select {
			case <-sig:
				return finish()
			case <-exited:
			}
			say("pid %d exited with status %d after %d s; restarting in %d s", child, rc, int(time.Since(began).Seconds()), int(delay.Seconds()))
		}
		select {
		case <-sig:
			return finish()
		case <-time.After(delay):
		}
		if time.Since(began) < 10*time.Second {
			delay = min(2*delay, 5*time.Second)
		} else {
			delay = time.Second
		}
	}
}

// status is a child's exit status as a shell gives it: 128 + the signal
// that killed it.
func status(err error, ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if err != nil && ps.ExitCode() < 0 {
		return 1
	}
	return ps.ExitCode()
}
