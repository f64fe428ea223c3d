// Package procstat reads a process's memory accounting from /proc (Linux),
// for the tests and benchmarks that hold memory to a bound.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// VmHWM is the peak resident memory, in bytes, of process pid ("self":
// this one) since its exec: /proc/PID/status's VmHWM, the process's own
// mark (getrusage's ru_maxrss of a child Go started carries the parent's).
func VmHWM(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("procstat: VmHWM of %s: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("procstat: no VmHWM in /proc/%s/status", pid)
}
