package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tusNode runs web/e2e/tus-resume.mjs (tus-js-client in Node) with env;
// onLine sees each line it prints and may return true to stop reading
// (the caller then kills it).
func tusNode(t *testing.T, env []string, onLine func(line string) (stop bool)) *exec.Cmd {
	t.Helper()
	return tusNodeScript(t, "e2e/tus-resume.mjs", env, onLine)
}

// tusNodeScript is tusNode with another script of web/.
func tusNodeScript(t *testing.T, script string, env []string, onLine func(line string) (stop bool)) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("node", script)
	cmd.Dir = filepath.Join("..", "..", "web")
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "node (run make web first)")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if onLine(lines.Text()) {
			return cmd
		}
	}
	require.NoError(t, cmd.Wait(), "tus-resume.mjs: %s", stderr.String())
	return cmd
}

// TestTusResumesAfterKill: tus-js-client in Node uploads a 6 MiB file in
// 512 KiB chunks; at a third the server and the client are both SIGKILLed.
// The server restarts on the same address and a new client finds the
// upload in tus-js-client's own URL storage and resumes it: the file is
// ready once, byte for byte, and the bytes sent in all are at most the
// file plus one chunk.
func TestTusResumesAfterKill(t *testing.T) {
	t.Parallel()
	k := newKillFixture(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	first := startServeOn(t, k.dbURL, k.cfgFile, addr)
	const size, chunk = 6 << 20, 512 << 10
	content := bytes.Repeat([]byte("id,name,amount,note\n"), size/20+1)[:size]
	dir := t.TempDir()
	path := filepath.Join(dir, "big.csv")
	require.NoError(t, os.WriteFile(path, content, 0o600))
	env := []string{"UF_API=" + first.base, "UF_TOKEN=" + k.token, "UF_FILE=" + path, "UF_STORE=" + filepath.Join(dir, "tus-urls.json"), fmt.Sprintf("UF_CHUNK=%d", chunk)}

	var sentBefore int64
	var progress struct{ Offset, Sent int64 }
	client := tusNode(t, append(env, "UF_STOP_AT_THIRD=1"), func(line string) bool {
		if line == "third" {
			return true
		}
		require.NoError(t, json.Unmarshal([]byte(line), &progress), line)
		sentBefore = progress.Sent
		return false
	})
	require.GreaterOrEqual(t, progress.Offset, int64(size/3))
	require.Less(t, progress.Offset, int64(size), "killed part way")
	require.NoError(t, first.cmd.Process.Kill())
	_ = first.cmd.Wait()
	require.NoError(t, client.Process.Kill())

	second := startServeOn(t, k.dbURL, k.cfgFile, addr)
	require.Equal(t, first.base, second.base)
	var done struct {
		Done, Resumed bool
		Sent          int64
		URL           string
	}
	tusNode(t, env, func(line string) bool {
		if strings.Contains(line, `"done"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &done))
		}
		return false
	})
	require.True(t, done.Done)
	require.True(t, done.Resumed, "the second client found the upload in its URL storage")
	total := sentBefore + done.Sent
	t.Logf("sent %d bytes in all for a %d-byte file (%d before the kill, %d after)", total, size, sentBefore, done.Sent)
	require.LessOrEqual(t, total, int64(size+chunk), "at most the file plus one chunk")

	require.Equal(t, 1, k.count("SELECT count(*) FROM uploaded_file"), "one upload, one file")
	var status, key, sum string
	require.NoError(t, k.conn.QueryRow(t.Context(), "SELECT status, key, checksum FROM uploaded_file").Scan(&status, &key, &sum))
	require.Equal(t, "ready", status)
	want := sha256.Sum256(content)
	require.Equal(t, "sha256:"+base64.StdEncoding.EncodeToString(want[:]), sum)
	stored, err := os.ReadFile(filepath.Join(k.root, key))
	require.NoError(t, err)
	require.Equal(t, content, stored, "byte for byte")
	require.Zero(t, k.count("SELECT count(*) FROM uploaded_file_chunk WHERE trimmed_at IS NULL"), "no live chunk is left")
}
