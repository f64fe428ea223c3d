package main

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// A child's peak memory is its own: with 256 MiB resident in this process,
// getrusage's ru_maxrss of a `sleep` it starts carries this process's
// high-water mark (what the reconcile row printed), and watchHWM reads the
// child's own few megabytes.
func TestChildPeakIsTheChildsOwn(t *testing.T) {
	ballast := make([]byte, 256<<20)
	for i := range ballast {
		ballast[i] = byte(i)
	}
	cmd := exec.Command("sleep", "0.3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchHWM(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	own := peak()
	inherited := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
	runtime.KeepAlive(ballast)
	if own <= 0 || own > 32<<20 {
		t.Errorf("watchHWM: %d bytes for a sleep", own)
	}
	if inherited < 200<<20 {
		t.Logf("ru_maxrss %d MiB: this kernel does not carry the parent's mark", inherited>>20)
	}
}
