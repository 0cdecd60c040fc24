package main

import (
	"context"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
)

func cmdToken(_ context.Context, e *env, args []string) error {
	fs := flags("token", e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	user := fs.String("user", "", "user ID, a positive integer (required)")
	ttl := fs.Duration("ttl", 0, "token lifetime (default: token_ttl of the config)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *user == "" {
		return usageError{"flag --user: required"}
	}
	u, err := hongbao.ParseUserID(*user)
	if err != nil {
		return usageError{fmt.Sprintf("flag --user: %q is not a positive integer user ID", *user)}
	}
	if *ttl < 0 {
		return usageError{"flag --ttl: must be positive"}
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	life := cfg.TokenTTL.D()
	if *ttl > 0 {
		life = *ttl
	}
	exp := time.Now().Add(life)
	fmt.Fprintf(e.stderr, "token for user %s, valid until %s\n", u, exp.Format(time.RFC3339))
	fmt.Fprintln(e.stdout, hongbao.NewSigner([]byte(cfg.Secret)).Sign(u, exp))
	return nil
}
