package clustertest

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// What a test does with a running cluster: requests through the router,
// hbctl, money, and the SETs' and core group's databases.

// URL returns the router's base URL, e.g. http://127.0.0.1:41234.
func (c *Cluster) URL() string { return "http://" + c.routerAddr }

// Token returns a valid bearer token for user.
func (c *Cluster) Token(user hongbao.UserID) string {
	if tok, ok := c.tokens.Load(user); ok {
		return tok.(string)
	}
	tok := c.signer.Sign(user, time.Now().Add(48*time.Hour))
	c.tokens.Store(user, tok)
	return tok
}

// Request builds a request to url (the router's, c.URL() + path, or
// straight to a server) with body as its JSON (nil: no body), the given
// headers and user's bearer token (user 0: none).
func (c *Cluster) Request(method, url string, user hongbao.UserID, body []byte, header map[string]string) *http.Request {
	req, err := NewRequest(method, url, body, header)
	if err != nil {
		panic(err)
	}
	if user != 0 {
		req.Header.Set("Authorization", "Bearer "+c.Token(user))
	}
	return req
}

// Do sends req over the Client's connection pool and reads the answer.
func (c *Cluster) Do(req *http.Request) Reply { return Do(c.Client.http, req) }

// Ctl runs hbctl with args and the cluster's -config (appended, so it
// follows the subcommand's own flags) and returns its combined output.
func (c *Cluster) Ctl(args ...string) (string, error) { return c.CtlWith(nil, args...) }

// CtlWith is Ctl with more environment variables (e.g. HBCTL_FAULT) and
// room for long commands (10 minutes).
func (c *Cluster) CtlWith(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "hbctl"), append(slices.Clone(args), "-config", c.Config)...)
	cmd.Env = append(Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// StartCtl starts a long-running hbctl (e.g. set watch) with args, the
// cluster's -config and the environment variables env, in the background
// like the cluster's processes: its output goes to its Log, it is killed
// when the test ends (Signal and Wait stop it gracefully).
func (c *Cluster) StartCtl(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	return StartProcess(t, &Process{Kind: "hbctl", Name: strings.Join(args[:min(2, len(args))], "-"),
		Bin: filepath.Join(c.bin, "hbctl"), Args: append(slices.Clone(args), "-config", c.Config), Env: env})
}

// MustCtl is Ctl failing the test when hbctl does.
func (c *Cluster) MustCtl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.Ctl(args...)
	if err != nil {
		t.Fatalf("hbctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Credit credits user with amount fen through hbctl wallet credit, as an
// operator does; a key makes the credit idempotent (--key), "" is none.
// It is safe from any goroutine.
func (c *Cluster) Credit(user hongbao.UserID, amount int64, key string) error {
	args := []string{"wallet", "credit", "--user", user.String(), "--amount", strconv.FormatInt(amount, 10)}
	if key != "" {
		args = append(args, "--key", key)
	}
	out, err := c.Ctl(args...)
	if err != nil {
		return fmt.Errorf("hbctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// TopUp is Credit without a key, failing the test when it fails.
func (c *Cluster) TopUp(t testing.TB, user hongbao.UserID, amount int64) {
	t.Helper()
	if err := c.Credit(user, amount, ""); err != nil {
		t.Fatal(err)
	}
}

// Set returns the SET called name.
func (c *Cluster) Set(name string) Set {
	for _, s := range c.Sets {
		if s.Name == name {
			return s
		}
	}
	c.t.Fatalf("clustertest: no SET %q", name)
	return Set{}
}

// DB returns a pool on the MariaDB of SET set (no database selected: name
// tables in full, db_xx.t_y_dd, hb_set.outbox, hb_fence.owned).
func (c *Cluster) DB(set string) *sql.DB {
	db := c.dbs[set]
	if db == nil {
		c.t.Fatalf("clustertest: no SET %q", set)
	}
	return db.DB()
}

// Follow points DB(set) at the member of replicated SET set's group that
// the meta database names its primary (after hbctl set failover), and
// returns it.
func (c *Cluster) Follow(t testing.TB, set string) *dbtest.MariaDB {
	t.Helper()
	s := c.Set(set)
	if s.Group == nil {
		t.Fatalf("clustertest: SET %s is not replicated", set)
	}
	var dsn string
	if err := c.DB(c.Sets[0].Name).QueryRow("SELECT mysql_dsn FROM hb_meta.sets WHERE name = ?", set).Scan(&dsn); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.Group.Members() {
		if m.AppDSN() == dsn {
			if _, err := c.dbs[set].To(m.DSN); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("clustertest: SET %s's MySQL %q is none of its group", set, dsn)
	return nil
}

// Wallet returns the wallet (accounts, ledger).
func (c *Cluster) Wallet() *wallet.Wallet { return c.wallet }

// Meta is a pool on the meta database (following the core group's
// primary, as the processes do).
func (c *Cluster) Meta() *sql.DB { return c.meta }

// WalletDB returns a pool on the wallet database.
func (c *Cluster) WalletDB() *sql.DB { return c.wallet.DB() }

// SetOf returns the name of the SET owning packet id in the current
// topology.
func (c *Cluster) SetOf(id hongbao.PacketID) (string, error) {
	var name string
	err := c.DB(c.Sets[0].Name).QueryRow("SELECT set_name FROM hb_meta.buckets WHERE bucket = ?", int(id.Bucket())).Scan(&name)
	if err != nil {
		return "", fmt.Errorf("clustertest: SET of %s: %w", id, err)
	}
	return name, nil
}
