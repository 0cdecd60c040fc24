package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreUsage: hbctl core's mistakes are usage errors (exit status 2)
// naming what is wrong, found before any database is asked.
func TestCoreUsage(t *testing.T) {
	raw, err := os.ReadFile("../../configs/dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noCore := filepath.Join(t.TempDir(), "nocore.yaml")
	i := bytes.Index(raw, []byte("core:\n  replicas:"))
	if i < 0 {
		t.Fatal("configs/dev.yaml has no core section")
	}
	if err := os.WriteFile(noCore, append(raw[:i:i], "\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		mention string
	}{
		{nil, "usage: hbctl core"},
		{[]string{"promote"}, "usage: hbctl core"},
		{[]string{"failover", "--bogus"}, "-bogus"},
		{[]string{"failover", "--to", "db1"}, "flag --to"},
		{[]string{"rejoin", "--to", "127.0.0.1:3347"}, "--to"},
		{[]string{"status", "--accept-single-copy"}, "--accept-single-copy"},
		{[]string{"failover", "extra"}, "extra"},
		{[]string{"failover", "-config", noCore}, "core.replicas"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := cmdCore(context.Background(), &env{stdout: &out, stderr: &out}, tt.args)
			var u usageError
			if !errors.As(err, &u) {
				t.Fatalf("hbctl core %v: %v, want a usage error", tt.args, err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("hbctl core %v: %q does not mention %q", tt.args, err, tt.mention)
			}
		})
	}
}
