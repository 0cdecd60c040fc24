package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestWatchUsage: the watch commands' mistakes are usage errors naming
// the flag or setting, found before any database is asked.
func TestWatchUsage(t *testing.T) {
	const cfg = "../../configs/dev.yaml"
	tests := []struct {
		args    []string
		environ []string
		mention string
	}{
		{[]string{"set", "watch", "b", "--interval", "0s"}, nil, "flag --interval"},
		{[]string{"set", "watch", "--after", "1s", "--interval", "1s"}, nil, "flag --after"},
		{[]string{"set", "watch", "b", "c", "--probe-timeout", "0s"}, nil, "flag --probe-timeout"},
		{[]string{"set", "watch", "b", "--bogus"}, nil, "-bogus"},
		{[]string{"set", "watch", "b"}, []string{"HB_REPLICATION_SEMI_SYNC_TIMEOUT=5s"}, "semi_sync_timeout"},
		{[]string{"core", "watch", "--to", "127.0.0.1:3347"}, nil, "flag --to"},
		{[]string{"core", "watch", "--after", "1s"}, nil, "flag --after"},
		{[]string{"core", "watch"}, []string{"HB_REPLICATION_SEMI_SYNC_TIMEOUT=1s"}, "semi_sync_timeout"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), &env{stdout: &out, stderr: &out, environ: tt.environ}, append(tt.args, "-config", cfg))
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("hbctl %v: %v; want a usage error mentioning %q", tt.args, err, tt.mention)
			}
		})
	}
}
