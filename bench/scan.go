package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
)

// startClamd runs Debian's clamd on a free loopback port with the EICAR
// test signature only (as the tests do) and StreamMaxLength 30 MiB.
func startClamd(dir string) (addr string, stop func(), err error) {
	if _, err := os.Stat(clamdtest.Binary); err != nil {
		return "", nil, fmt.Errorf("the scan bench needs clamd: apt-get install clamav-daemon (.ci/run does)")
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	db := filepath.Join(dir, "clamd-db")
	if err := os.MkdirAll(db, 0o750); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(db, "uftest.ndb"), []byte("UF.Test.EICAR:0:*:"+hex.EncodeToString([]byte(clamdtest.EICAR))+"\n"), 0o600); err != nil {
		return "", nil, err
	}
	_, p, _ := strings.Cut(port, ":")
	conf := filepath.Join(dir, "clamd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("Foreground yes\nDatabaseDirectory %s\nTCPSocket %s\nTCPAddr 127.0.0.1\nStreamMaxLength 30M\nMaxThreads 16\nSelfCheck 0\nLogFile %s\n",
		db, p, filepath.Join(dir, "clamd.log"))), 0o600); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(clamdtest.Binary, "-c", conf)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr = "tcp://" + port
	c, _ := clamd.New(addr, 2*time.Second)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if c.Ping(context.Background()) == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("clamd did not start")
		}
	}
}

// benchScan compares uploads through the scan gate (a server with
// scan.mode gate on the real clamd) with the plain server, 1 MiB at 8
// clients, and measures clamd's own INSTREAM rate for the same bytes, so
// the table shows what the service adds to the scan.
func benchScan(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	addr, stop, err := startClamd(tmp)
	if err != nil {
		return err
	}
	defer stop()
	gated, stopGated, err := startVariant(ctx, bin, tmp, "scan", secret, fmt.Sprintf("scan:\n  mode: gate\n  clamd: %s\n", addr))
	if err != nil {
		return err
	}
	defer stopGated()
	on := &env{uf: gated, token: e.token}
	client, err := clamd.New(addr, time.Minute)
	if err != nil {
		return err
	}
	size, clients := 1<<20, 8
	body := payload(size)
	ct, form := multipartBody("data.csv", body)
	in := initiateInput(body)
	n := count(size)
	rs, m, err := measure("scan bench",
		func() stats { return load(clients, n, func(int) error { return e.bufferUpload(ct, form) }) },
		func() stats { return load(clients, n, func(int) error { return on.bufferUpload(ct, form) }) },
		func() stats { return load(clients, n, func(int) error { return e.directUpload(in, body) }) },
		func() stats { return load(clients, n, func(int) error { return on.directUpload(in, body) }) },
		func() stats {
			return load(clients, n, func(int) error {
				v, err := client.Scan(ctx, bytes.NewReader(body))
				if err == nil && v.Infected {
					err = fmt.Errorf("clean bytes reported infected")
				}
				return err
			})
		},
	)
	if err != nil {
		return err
	}
	alone := m[4]
	rep.add("clamd INSTREAM alone, 1 MiB, 8 clients", fmt.Sprintf("%.0f scans/s (p50 %s)", alone.rps(), alone.p50.Round(time.Millisecond)), "", true)
	for i, label := range []string{"buffer upload 1 MiB, 8 clients", "direct upload 1 MiB, 8 clients"} {
		off, with := m[2*i], m[2*i+1]
		rep.add(label+": scan gate on vs off", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; clamd alone %.0f/s)", ratioOf(rs, 2*i+1, 2*i), with.rps(), off.rps(), alone.rps()), "", true)
	}
	return nil
}
