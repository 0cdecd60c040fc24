package replication

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// templatePrefix names the bootstrapped data directories kept in the
// system's temporary directory, one per MariaDB version and install
// options.
const templatePrefix = "hongbao-mariadb-template-"

// InstallDataDir makes datadir (which must not exist) a fresh MariaDB
// data directory: what mariadb-install-db leaves with root's
// password-less socket login, no test database and the options opts (e.g.
// --innodb-log-file-size=16M), as a copy of a template bootstrapped once
// per machine, MariaDB version and options, in the system's temporary
// directory. The test harnesses (dbtest) and the dev cluster (hbdev
// install-datadir, for scripts/dev.sh) both make their servers so.
//
// Why a copy: make test starts hundreds of private servers, and a
// bootstrap runs every system table's SQL through a mariadbd of its own: a
// profile of make test put a fifth of all MariaDB CPU in bootstraps. A
// copy of the 34 MB a bootstrap writes costs a few milliseconds and is the
// same bytes (MariaDB keeps no per-instance identity in its data
// directory: the server ID is an option). A loaded host now and then
// breaks a bootstrap: it is tried up to three times.
func InstallDataDir(datadir string, opts ...string) error {
	args := append([]string{"--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db"}, opts...)
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	var tmpl string
	var err error
	for range 3 {
		if tmpl, err = template(args); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", "--reflink=auto", tmpl, datadir).CombinedOutput(); err != nil {
		return fmt.Errorf("copy of the MariaDB template %s: %v\n%s", tmpl, err, out)
	}
	return nil
}

// template returns the template data directory for mariadb-install-db
// with args, bootstrapping it first when this machine has none. Test
// binaries racing to make it each bootstrap into a directory of their own
// and rename it into place: the first rename wins, the others' copies are
// thrown away, and nobody ever copies a half-made template.
func template(args []string) (string, error) {
	version, err := exec.Command("mariadbd", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("mariadbd --version: %w", err)
	}
	sum := sha256.Sum256([]byte(string(version) + "\x00" + strings.Join(args, "\x00")))
	tmpl := filepath.Join(os.TempDir(), templatePrefix+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(tmpl, "mysql")); err == nil {
		return tmpl, nil
	}
	work, err := os.MkdirTemp("", templatePrefix+"new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work) // what is left of it after the rename, or a loser's copy
	if err := os.Mkdir(work+"/tmp", 0o700); err != nil {
		return "", err
	}
	install := exec.Command("mariadb-install-db", append(args, "--datadir="+work+"/data", "--tmpdir="+work+"/tmp")...)
	if out, err := install.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	if err := os.Rename(work+"/data", tmpl); err != nil {
		if _, serr := os.Stat(filepath.Join(tmpl, "mysql")); serr == nil {
			return tmpl, nil // another test binary's template won the race
		}
		return "", errors.Join(fmt.Errorf("MariaDB template %s", tmpl), err)
	}
	return tmpl, nil
}
