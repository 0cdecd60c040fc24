package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestStatementAndWebhookUsage: bad flags of hbctl statement and hbctl
// webhook are usage errors naming the flag, found before any database is
// reached.
func TestStatementAndWebhookUsage(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		mention string
	}{
		{[]string{"statement"}, "flag --day"},
		{[]string{"statement", "--day", "2026-13-01"}, "flag --day"},
		{[]string{"statement", "--day", "26/11/2026"}, `"26/11/2026"`},
		{[]string{"statement", "--day", "2026-11-26", "--format", "xlsx"}, "flag --format"},
		{[]string{"statement", "--bogus"}, "-bogus"},
		{[]string{"webhook"}, "usage: hbctl webhook"},
		{[]string{"webhook", "send"}, "usage: hbctl webhook"},
		{[]string{"webhook", "list", "--state", "lost"}, "flag --state"},
		{[]string{"webhook", "list", "--type", "packet.eaten"}, "flag --type"},
		{[]string{"webhook", "replay", "--packet", "x"}, "flag --packet"},
		{[]string{"webhook", "list", "--limit", "0"}, "flag --limit"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), &env{stdout: &out, stderr: &out}, tt.args)
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("hbctl %v: %v, want a usage error mentioning %q", tt.args, err, tt.mention)
			}
		})
	}
}
