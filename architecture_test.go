package hongbao_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hongbao-dev/hongbao"

// harnesses are the test-only packages of e2e/ (harnesses and end-to-end
// tests); ARCHITECTURE.md names them apart. scripts/archtable.py takes the
// same list as its arguments.
var harnesses = []string{"e2e", "e2e/harness/dbtest", "e2e/harness/clustertest", "e2e/harness/archivetest",
	"e2e/harness/browsertest", "e2e/harness/packettest", "e2e/harness/ctltest",
	"e2e/packets", "e2e/failover", "e2e/metrics", "e2e/replication", "e2e/face", "e2e/dev",
	"e2e/rebalance", "e2e/verify", "e2e/watch", "e2e/archive", "e2e/crash",
	"e2e/harness/etcdtest", "e2e/harness/hosts", "e2e/liveness", "e2e/harness/devhosts", "e2e/clock",
	"e2e/harness/devrun"}

// goPackage is what `go list -json` says of a package.
type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs `go list -json` with args in the module's root.
func goList(t *testing.T, args ...string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// short names a package of ours as ARCHITECTURE.md does ("" if not ours).
func short(path string) string {
	switch {
	case path == module:
		return "hongbao"
	case strings.HasPrefix(path, module+"/"):
		return strings.TrimPrefix(path, module+"/")
	}
	return ""
}

// documented reads the package table of docs/ARCHITECTURE.md: package ->
// its imports among ours.
func documented(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z/]+)`[^|]*\\|([^|]*)\\|")
	name := regexp.MustCompile("`([a-z0-9/]+)`")
	out := map[string][]string{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var imports []string
		for _, n := range name.FindAllStringSubmatch(m[2], -1) {
			imports = append(imports, n[1])
		}
		slices.Sort(imports)
		// Arrows point up the table: every import is a row above, but
		// a harness's (cmd/hbdev's e2e/harness/devhosts), which has none.
		for _, imp := range imports {
			if !slices.Contains(order, imp) && !slices.Contains(harnesses, imp) {
				t.Errorf("docs/ARCHITECTURE.md: %s imports %s, which is not above it in the table", m[1], imp)
			}
		}
		order = append(order, m[1])
		out[m[1]] = imports
	}
	if len(out) == 0 {
		t.Fatal("no package table in docs/ARCHITECTURE.md")
	}
	return out
}

// TestArchitectureMatchesGoList: the package table of ARCHITECTURE.md is
// exactly the packages and imports go list shows.
func TestArchitectureMatchesGoList(t *testing.T) {
	doc := documented(t)
	seen := map[string]bool{}
	for _, p := range goList(t, "./...") {
		name := short(p.ImportPath)
		if slices.Contains(harnesses, name) {
			continue
		}
		seen[name] = true
		var ours []string
		for _, imp := range p.Imports {
			if s := short(imp); s != "" {
				ours = append(ours, s)
			}
		}
		slices.Sort(ours)
		want, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("package %s is missing from docs/ARCHITECTURE.md", name)
		case !slices.Equal(ours, want):
			t.Errorf("package %s imports %v; docs/ARCHITECTURE.md says %v", name, ours, want)
		}
	}
	for name := range doc {
		if !seen[name] {
			t.Errorf("docs/ARCHITECTURE.md lists %s, which go list does not show", name)
		}
	}
}

// TestLayering: the dependency rules of issue 11 hold.
func TestLayering(t *testing.T) {
	// The router reads the topology (set/topology) through the MySQL
	// plumbing (store/sqldb); nothing else of a SET's.
	allowed := map[string]bool{module + "/set/topology": true, module + "/store/sqldb": true}
	forbidden := func(pkg string, deps []string, bad ...string) {
		for _, d := range deps {
			for _, b := range bad {
				if allowed[d] {
					continue
				}
				if d == b || strings.HasPrefix(d, b+"/") {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}
	router := goList(t, "./router")[0]
	forbidden("router", router.Deps, module+"/store", module+"/queue", module+"/set", "github.com/bradfitz/gomemcache")
	for _, leaf := range []string{".", "./configs"} {
		p := goList(t, leaf)[0]
		for _, d := range p.Deps {
			if short(d) != "" {
				t.Errorf("%s must import nothing of hongbao's, depends on %s", p.ImportPath, d)
			}
		}
	}
	for _, p := range goList(t, "./cmd/...") {
		forbidden(p.ImportPath, p.Deps, "github.com/redis/go-redis", "golang.org/x/image", "github.com/chromedp")
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"go-redis", "x/image"} {
		if bytes.Contains(gomod, []byte(m)) {
			t.Errorf("the product's go.mod requires %s: the benchmark's dependencies belong in cmd/hbbench/go.mod", m)
		}
	}
}

// TestTreeHygiene: no built binary is tracked and no Go file outgrows a
// screenful of subjects.
func TestTreeHygiene(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // deleted in the work tree
		}
		if bytes.HasPrefix(data, []byte("\x7fELF")) || len(data) > 2<<20 {
			t.Errorf("%s is tracked: a binary or a %d-byte file does not belong in git", f, len(data))
		}
		if strings.HasSuffix(f, ".go") {
			if n := bytes.Count(data, []byte("\n")); n > 650 {
				t.Errorf("%s has %d lines: split it by subject (at most ~600)", f, n)
			}
		}
	}
}
