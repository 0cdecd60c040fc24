package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// restartWith is hbdev restart-with -run DIR KIND NAME [ARG...]: the
// supervised process KIND-NAME runs from now on with ARGs after its
// command line (none: as started), e.g. hbchaos's -clock-offset 5m for a
// host whose clock is off. It writes them to RUN/KIND-NAME.args, which
// its supervisor reads before each start (and a new supervisor removes),
// stops the running process (TERM, then KILL after 30 s) and waits until
// the supervisor has started it again. Fault injection for chaos and
// tests: a flag file in .run, no environment variable.
func restartWith(args []string) error {
	p, err := parseNamed("restart-with", args, 2, "want KIND NAME [ARG...]")
	if err != nil {
		return err
	}
	if !alive(p.supPidFile()) {
		return fmt.Errorf("%s %s has no supervisor (%s)", p.kind, p.name, p.supPidFile())
	}
	if len(p.argv) == 0 {
		if err := os.Remove(p.argsFile()); err != nil && !os.IsNotExist(err) {
			return err
		}
	} else if err := os.WriteFile(p.argsFile(), []byte(strings.Join(p.argv, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	old := pidOf(p.pidFile())
	if old != 0 {
		_ = syscall.Kill(old, syscall.SIGTERM)
		for i := 0; i < 300 && !gone(old); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(old, syscall.SIGKILL)
	}
	// The supervisor starts it again a second or more (its backoff) after
	// the exit.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if now := pidOf(p.pidFile()); now != 0 && now != old && alive(p.pidFile()) {
			return nil
		}
	}
	return fmt.Errorf("%s %s was not started again within 30 s", p.kind, p.name)
}

// extra is the arguments restart-with gave the process (none when its
// file is absent).
func (p process) extra() []string {
	b, err := os.ReadFile(p.argsFile())
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// withExtra is how the supervisor's log line names the extra arguments.
func withExtra(extra []string) string {
	if len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf(" with %q (hbdev restart-with)", extra)
}
