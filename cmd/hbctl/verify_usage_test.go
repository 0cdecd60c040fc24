package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestVerifyUsage: hbctl verify's flag mistakes are usage errors (exit
// status 2) naming what is wrong, found before any database is asked.
func TestVerifyUsage(t *testing.T) {
	tests := []struct {
		args    []string
		mention string
	}{
		{[]string{"--sweep-after", "-1s"}, "--sweep-after must not be negative"},
		{[]string{"--sweep-after", "soon"}, "sweep-after"},
		{[]string{"--restore-marks=maybe"}, "restore-marks"},
		{[]string{"extra"}, "extra"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := cmdVerify(context.Background(), &env{stdout: &out, stderr: &out}, tt.args)
			var u usageError
			if !errors.As(err, &u) {
				t.Fatalf("hbctl verify %v: %v, want a usage error", tt.args, err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("hbctl verify %v: %q does not mention %q", tt.args, err, tt.mention)
			}
		})
	}
}
