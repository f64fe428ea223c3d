// Package s3test runs a real S3-compatible server for tests.
//
// Two servers are built from the Go module proxy with `go tool` (cached by
// the Go build cache) and started on a free 127.0.0.1 port with a temporary
// directory: versitygw (its posix backend; tools/go.mod) and MinIO
// (tools/minio/go.mod, a module of its own because its dependency graph
// clashes with the other tools). Which one a test package uses is chosen by
// the environment, so `make test` runs the S3 packages once on each:
//
//	UPLOADEDFILE_TEST_S3=versitygw  (the default)
//	UPLOADEDFILE_TEST_S3=minio
//
// Any other S3 endpoint can be targeted instead by setting
// UPLOADEDFILE_TEST_S3_ENDPOINT (with UPLOADEDFILE_TEST_S3_REGION,
// UPLOADEDFILE_TEST_S3_ACCESS_KEY, UPLOADEDFILE_TEST_S3_SECRET_KEY and
// optionally UPLOADEDFILE_TEST_S3_BUCKET, the prefix of the bucket names the
// tests create; the credentials must be allowed to create buckets).
//
// A test package that needs S3 calls Main from its TestMain, which starts
// the servers it uses lazily for the whole package and stops them when the
// package's tests end; each test then takes a fresh bucket with New. A test
// that needs S3 fails, never skips, when the server cannot start.
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
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
)

// Region is the region the test servers answer for.
const Region = "us-east-1"

// BrowserOrigin is the web origin the test servers' CORS allows: versitygw
// through the bucket rule a test applies (BucketCORSRule), MinIO -- which
// has no bucket CORS API -- through its server-wide setting.
const BrowserOrigin = "https://app.example.test"

// BucketCORSRule is the bucket CORS rule docs/browser.md gives for a
// browser that uploads to presigned PUTs and reads presigned GETs from
// origins: the methods, the headers the presigned PUT signs, ETag exposed.
func BucketCORSRule(origins ...string) types.CORSRule {
	return types.CORSRule{
		AllowedOrigins: origins,
		AllowedMethods: []string{"PUT", "GET", "HEAD"},
		AllowedHeaders: []string{"content-type", "x-amz-checksum-sha256", "if-none-match"},
		ExposeHeaders:  []string{"ETag"},
		MaxAgeSeconds:  aws.Int32(600),
	}
}

// The servers this package can start.
const (
	VersityGW = "versitygw"
	MinIO     = "minio"
	External  = "external" // an endpoint given in the environment
)

// Environment variables that choose the server.
const (
	EnvServer    = "UPLOADEDFILE_TEST_S3"
	EnvEndpoint  = "UPLOADEDFILE_TEST_S3_ENDPOINT"
	EnvRegion    = "UPLOADEDFILE_TEST_S3_REGION"
	EnvAccessKey = "UPLOADEDFILE_TEST_S3_ACCESS_KEY"
	EnvSecretKey = "UPLOADEDFILE_TEST_S3_SECRET_KEY"
	EnvBucket    = "UPLOADEDFILE_TEST_S3_BUCKET"
)

// Server is a running S3-compatible server.
type Server struct {
	Kind      string // VersityGW, MinIO or External
	Endpoint  string // http://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
	prefix    string
	cmd       *exec.Cmd
	exited    chan struct{}
	dir       string
	buckets   atomic.Int64
}

var (
	servers   = map[string]*Server{}
	startErrs = map[string]error{}
	sharedMu  sync.Mutex
	inMain    bool
)

// Main runs the package's tests and stops the servers that were started
// afterwards: func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }.
func Main(m *testing.M) int {
	sharedMu.Lock()
	inMain = true
	sharedMu.Unlock()
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
	return code
}

// Selected names the server the environment selects: External when
// UPLOADEDFILE_TEST_S3_ENDPOINT is set, else UPLOADEDFILE_TEST_S3
// (default VersityGW).
func Selected() string {
	if os.Getenv(EnvEndpoint) != "" {
		return External
	}
	if k := os.Getenv(EnvServer); k != "" {
		return k
	}
	return VersityGW
}

// Shared returns the package's server of the selected kind, starting it on
// first use.
func Shared(t testing.TB) *Server { t.Helper(); return SharedOf(t, Selected()) }

// SharedOf returns the package's server of kind, starting it on first use
// (for tests of what only one server does, such as MinIO's anonymous
// bucket policies).
func SharedOf(t testing.TB, kind string) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	require.True(t, inMain, "s3test: call s3test.Main from the package's TestMain")
	if servers[kind] == nil && startErrs[kind] == nil {
		servers[kind], startErrs[kind] = StartKind(kind)
	}
	require.NoError(t, startErrs[kind], "s3test: start %s", kind)
	return servers[kind]
}

// New creates a fresh bucket on the selected server and returns a driver
// configuration for it (path-style, static credentials).
func New(t testing.TB) s3store.Config { t.Helper(); return Shared(t).NewBucket(t) }

// NewBucket creates a fresh bucket on s and returns a driver configuration
// for it.
func (s *Server) NewBucket(t testing.TB) s3store.Config {
	t.Helper()
	bucket := fmt.Sprintf("%s-%d-%d", s.prefix, os.Getpid(), s.buckets.Add(1))
	_, err := s.Client().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &bucket})
	require.NoError(t, err, "s3test: create bucket on %s", s.Kind)
	return s.Config(bucket)
}

// Config returns a driver configuration for bucket on this server.
func (s *Server) Config(bucket string) s3store.Config {
	return s3store.Config{
		Bucket: bucket, Region: s.Region, Endpoint: s.Endpoint, ForcePathStyle: true,
		AccessID: s.AccessKey, AccessKey: s.SecretKey,
	}
}

// Client returns a raw SDK client for this server (for tests that inspect
// the bucket directly).
func (s *Server) Client() *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}, nil
		}),
	})
}

// Start starts the server the environment selects. The caller must Stop it.
func Start() (*Server, error) { return StartKind(Selected()) }

// StartKind builds the server of kind if needed and starts it (External:
// only checks the environment). The caller must Stop it.
func StartKind(kind string) (*Server, error) {
	if kind == External {
		return external()
	}
	var tool, modfile string
	switch kind {
	case VersityGW:
		tool, modfile = "versitygw", "tools/go.mod"
	case MinIO:
		tool, modfile = "minio", "tools/minio/go.mod"
	default:
		return nil, fmt.Errorf("s3test: %s=%q: want %s or %s", EnvServer, kind, VersityGW, MinIO)
	}
	bin, err := binary(tool, modfile)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", kind+"-*")
	if err != nil {
		return nil, err
	}
	s := &Server{Kind: kind, Region: Region, AccessKey: "test" + randomHex(8), SecretKey: randomHex(20), dir: dir, prefix: "test"}
	for attempt := 0; attempt < 5; attempt++ {
		if err = s.start(bin); err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

// external describes the endpoint the environment names.
func external() (*Server, error) {
	s := &Server{
		Kind: External, Endpoint: os.Getenv(EnvEndpoint), Region: os.Getenv(EnvRegion),
		AccessKey: os.Getenv(EnvAccessKey), SecretKey: os.Getenv(EnvSecretKey), prefix: os.Getenv(EnvBucket),
	}
	if s.Region == "" {
		s.Region = Region
	}
	if s.prefix == "" {
		s.prefix = "uploadedfile-test"
	}
	if s.AccessKey == "" || s.SecretKey == "" {
		return nil, fmt.Errorf("s3test: %s is set: set %s and %s too", EnvEndpoint, EnvAccessKey, EnvSecretKey)
	}
	return s, nil
}

// command is how each server is started on addr, serving s.dir.
func (s *Server) command(bin, addr string) *exec.Cmd {
	var cmd *exec.Cmd
	switch s.Kind {
	case MinIO:
		cmd = exec.Command(bin, "server", "--quiet", "--address", addr, s.dir)
		// Credentials through the environment, not the command line (ps);
		// no console, no update checks.
		cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
			"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_REGION="+s.Region, "MINIO_API_CORS_ALLOW_ORIGIN="+BrowserOrigin)
	default:
		cmd = exec.Command(bin, "--port", addr, "--quiet", "--region", s.Region, "posix", s.dir)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	}
	return cmd
}

// readyPath answers 200 once the server serves requests.
func (s *Server) readyPath() string {
	if s.Kind == MinIO {
		return "/minio/health/ready"
	}
	return "/"
}

func (s *Server) start(bin string) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	s.Endpoint = "http://" + addr
	cmd := s.command(bin, addr)
	// The server dies with the test binary, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: start %s: %w", s.Kind, err)
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
	deadline := time.After(60 * time.Second)
	for {
		select {
		case <-exited:
			tailMu.Lock()
			defer tailMu.Unlock()
			return fmt.Errorf("s3test: %s exited: %s", s.Kind, tail.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("s3test: %s did not answer on %s", s.Kind, addr)
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(s.Endpoint + s.readyPath())
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				s.cmd, s.exited = cmd, exited
				return nil
			}
		}
	}
}

// Stop kills the server and removes its data.
func (s *Server) Stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// binary builds (or finds in the build cache) tool at the version pinned in
// modfile (relative to the module root) and returns its path.
func binary(tool, modfile string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("s3test: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("s3test: not inside the uploadedfile module")
	}
	root := filepath.Dir(gomod)
	cmd := exec.Command("go", "tool", "-modfile="+filepath.Join(root, modfile), "-n", tool)
	cmd.Dir = root
	path, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("s3test: build %s: %s", tool, ee.Stderr)
		}
		return "", fmt.Errorf("s3test: build %s: %w", tool, err)
	}
	return strings.TrimSpace(string(path)), nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
