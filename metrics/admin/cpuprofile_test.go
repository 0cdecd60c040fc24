package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := CPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("profile %s: %v, %v; want a non-empty file", path, st, err)
	}
	stop, err = CPUProfile("")
	if err != nil {
		t.Fatalf("no path: %v", err)
	}
	stop()
	if _, err := CPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof")); err == nil || !strings.Contains(err.Error(), "-cpuprofile") {
		t.Errorf("unwritable path: %v, want an error naming -cpuprofile", err)
	}
}
