package main

import (
	"context"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

const walletUsage = "usage: hbctl wallet credit --user U --amount FEN [--key K] | show --user U"

func cmdWallet(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || (args[0] != "credit" && args[0] != "show") {
		return usageError{walletUsage}
	}
	fs := flags("wallet "+args[0], e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	user := fs.String("user", "", "user ID (required)")
	amount := fs.Int64("amount", 0, "credit: amount in fen, a positive integer")
	key := fs.String("key", "", "credit: idempotency key of the top-up (default: a new one)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	u, err := hongbao.ParseUserID(*user)
	if err != nil {
		return usageError{fmt.Sprintf("flag --user: %q is not a positive integer user ID", *user)}
	}
	if args[0] == "credit" && *amount <= 0 {
		return usageError{"flag --amount: must be a positive integer number of fen"}
	}
	_, w, err := openWallet(ctx, e, *cfgPath)
	if err != nil {
		return err
	}
	defer w.Close()
	if args[0] == "credit" {
		k, fresh, err := w.TopUp(ctx, u, *amount, *key)
		if err != nil {
			return err
		}
		if !fresh {
			fmt.Fprintf(e.stdout, "top-up %s was already applied; nothing moved\n", k)
		}
	}
	bal, err := w.Balance(ctx, u)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "user %s balance %d fen\n", u, bal)
	return nil
}

// openWallet loads the config at path and opens its wallet.
func openWallet(ctx context.Context, e *env, path string) (*configs.Config, *wallet.Wallet, error) {
	cfg, err := configs.Load(path, e.environ)
	if err != nil {
		return nil, nil, err
	}
	w, err := wallet.Open(ctx, cfg.WalletDSN, cfg.CoreMembers(), 2, time.Now)
	if err != nil {
		return nil, nil, err
	}
	return cfg, w, nil
}
