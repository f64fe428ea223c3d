// Package s3test runs a real S3-compatible server for tests: versitygw,
// built with `go tool -modfile=tools/go.mod` (cached by the Go build cache)
// and started with its posix backend on a free 127.0.0.1 port and a
// temporary directory.
//
// A test package that needs S3 calls Main from its TestMain, which starts
// one server lazily for the whole package and stops it when the package's
// tests end; each test then takes a fresh bucket with New. A test that needs
// S3 fails, never skips, when the server cannot start.
package s3test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
)

// Region is the region the test server answers for.
const Region = "us-east-1"

// Server is a running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	cmd       *exec.Cmd
	exited    chan struct{}
	dir       string
	buckets   atomic.Int64
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
	inMain    bool
)

// Main runs the package's tests and stops the shared server, if one was
// started, afterwards: func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }.
func Main(m *testing.M) int {
	sharedMu.Lock()
	inMain = true
	sharedMu.Unlock()
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// Shared returns the package's server, starting it on first use.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	require.True(t, inMain, "s3test: call s3test.Main from the package's TestMain")
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start()
	}
	require.NoError(t, sharedErr, "s3test: start versitygw")
	return shared
}

// New creates a fresh bucket on the shared server and returns a driver
// configuration for it (path-style, static credentials).
func New(t testing.TB) s3store.Config {
	t.Helper()
	srv := Shared(t)
	bucket := fmt.Sprintf("test-%d-%d", os.Getpid(), srv.buckets.Add(1))
	client := srv.Client()
	_, err := client.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &bucket})
	require.NoError(t, err, "s3test: create bucket")
	return srv.Config(bucket)
}

// Config returns a driver configuration for bucket on this server.
func (s *Server) Config(bucket string) s3store.Config {
	return s3store.Config{
		Bucket: bucket, Region: Region, Endpoint: s.Endpoint, ForcePathStyle: true,
		AccessID: s.AccessKey, AccessKey: s.SecretKey,
	}
}

// Client returns a raw SDK client for this server (for tests that inspect
// the bucket directly).
func (s *Server) Client() *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}, nil
		}),
	})
}

// Start builds versitygw if needed and starts it. The caller must Stop it.
func Start() (*Server, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "versitygw-*")
	if err != nil {
		return nil, err
	}
	s := &Server{AccessKey: "test" + randomHex(8), SecretKey: randomHex(20), dir: dir}
	for attempt := 0; attempt < 5; attempt++ {
		if err = s.start(bin); err == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, err
}

func (s *Server) start(bin string) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	s.Endpoint = "http://" + addr
	cmd := exec.Command(bin, "--port", addr, "--quiet", "--region", Region, "posix", s.dir)
	// Credentials through the environment, not the command line (ps).
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	// The server dies with the test binary, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: start versitygw: %w", err)
	}
	var tail strings.Builder
	var tailMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			tailMu.Lock()
			if tail.Len() < 4096 {
				tail.WriteString(sc.Text() + "\n")
			}
			tailMu.Unlock()
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-exited:
			tailMu.Lock()
			defer tailMu.Unlock()
			return fmt.Errorf("s3test: versitygw exited: %s", tail.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("s3test: versitygw did not answer on %s", addr)
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			s.cmd, s.exited = cmd, exited
			return nil
		}
	}
}

// Stop kills the server and removes its data.
func (s *Server) Stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

// binary builds (or finds in the build cache) versitygw at the version
// pinned in tools/go.mod and returns its path.
func binary() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("s3test: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("s3test: not inside the uploadedfile module")
	}
	toolsMod := filepath.Join(filepath.Dir(gomod), "tools", "go.mod")
	cmd := exec.Command("go", "tool", "-modfile="+toolsMod, "-n", "versitygw")
	cmd.Dir = filepath.Dir(gomod)
	path, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("s3test: build versitygw: %s", ee.Stderr)
		}
		return "", fmt.Errorf("s3test: build versitygw: %w", err)
	}
	return strings.TrimSpace(string(path)), nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
