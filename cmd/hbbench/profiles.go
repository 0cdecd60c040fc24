package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// rowProfiles takes CPU profiles of the cluster's processes through their
// admin listeners (pprof) while one run of a row goes on, so each
// profile covers that load alone: dir/<row>-<conns>-<process>.pprof. The
// caller waits on the returned function before the next run.
func rowProfiles(ctx context.Context, admins map[string]string, dir, row string, conns int, d time.Duration) func() {
	if dir == "" || len(admins) == 0 || d < 2*time.Second {
		return func() {}
	}
	secs := int((d - time.Second).Seconds())
	var wg sync.WaitGroup
	for name, addr := range admins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			file := filepath.Join(dir, fmt.Sprintf("%s-%d-%s.pprof", row, conns, name))
			if err := fetchProfile(ctx, "http://"+addr+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), file); err != nil {
				fmt.Fprintf(os.Stderr, "hbbench: profile of %s: %v\n", name, err)
			}
		}()
	}
	return wg.Wait
}

func fetchProfile(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseAdmins reads "name=host:port,..." (the -profile-admins flag).
func parseAdmins(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range split(s) {
		name, addr, ok := strings.Cut(f, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("%q is not name=host:port", f)
		}
		out[name] = addr
	}
	return out, nil
}
