package admin

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// CPUProfile writes the process's CPU profile to path until the returned
// stop is called (the -cpuprofile flag of the long-running processes, for
// benchmarks: pprof on the admin listener samples a window, this the whole
// run). An empty path profiles nothing.
func CPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("flag -cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("flag -cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
