package storagefault_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
)

func setup(t *testing.T) (*storagefault.Store, *local.Store) {
	t.Helper()
	inner, err := local.New(local.Config{Root: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { inner.Close() })
	return storagefault.Wrap(inner), inner
}

var ctx = context.Background()

func put(s storage.Store, key string) error {
	_, err := s.Put(ctx, key, strings.NewReader("abc"), storage.PutOptions{ContentType: "text/plain", Size: 3})
	return err
}

func TestFailNthBefore(t *testing.T) {
	t.Parallel()
	s, inner := setup(t)
	s.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Before, Nth: 2})
	require.NoError(t, put(s, "a/1"))
	require.ErrorIs(t, put(s, "a/2"), storagefault.ErrInjected)
	require.NoError(t, put(s, "a/3"))
	_, err := inner.Stat(ctx, "a/2")
	require.ErrorIs(t, err, storage.ErrNotFound, "a Before fault never reaches storage")
	require.Equal(t, 3, s.Calls(storagefault.OpPut))
}

func TestFailAfterTheWrite(t *testing.T) {
	t.Parallel()
	s, inner := setup(t)
	boom := errors.New("connection reset")
	s.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.After, Err: boom})
	require.ErrorIs(t, put(s, "a/lost-response"), boom)
	_, err := inner.Stat(ctx, "a/lost-response")
	require.NoError(t, err, "an After fault performs the write, then reports failure")
}

func TestKeyFilterAndEveryCall(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	s.Inject(storagefault.Fault{Op: storagefault.OpDelete, Key: func(k string) bool { return strings.HasPrefix(k, "bad/") }})
	require.NoError(t, s.Delete(ctx, "good/x"))
	require.ErrorIs(t, s.Delete(ctx, "bad/x"), storagefault.ErrInjected)
	require.ErrorIs(t, s.Delete(ctx, "bad/y"), storagefault.ErrInjected, "Nth 0 hits every matching call")
	s.Reset()
	require.NoError(t, s.Delete(ctx, "bad/x"))
}

func TestHangUntilContextEnds(t *testing.T) {
	t.Parallel()
	s, inner := setup(t)
	s.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Hang, Nth: 1})
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := s.Put(cctx, "a/slow", strings.NewReader("abc"), storage.PutOptions{Size: 3})
	require.ErrorIs(t, err, context.DeadlineExceeded, "it returned only when the context ended")
	_, err = inner.Stat(ctx, "a/slow")
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// TestSpoolCommitIsAPut: a spool's commit is subject to Put faults, so the
// fault tests cover both ways an object is written; spool creation has its
// own operation.
func TestSpoolCommitIsAPut(t *testing.T) {
	t.Parallel()
	s, inner := setup(t)
	commit := func(key string) error {
		sp, err := storage.NewSpool(ctx, s, t.TempDir())
		if err != nil {
			return err
		}
		defer sp.Close()
		if _, err := sp.Write([]byte("abc")); err != nil {
			return err
		}
		_, err = sp.Commit(ctx, key, storage.PutOptions{ContentType: "text/plain", Size: 3})
		return err
	}
	s.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Before, Nth: 1})
	require.ErrorIs(t, commit("s/before"), storagefault.ErrInjected)
	_, err := inner.Stat(ctx, "s/before")
	require.ErrorIs(t, err, storage.ErrNotFound, "a Before fault never links the spool")
	s.Reset()
	s.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.After, Nth: 1})
	require.ErrorIs(t, commit("s/after"), storagefault.ErrInjected)
	_, err = inner.Stat(ctx, "s/after")
	require.NoError(t, err, "an After fault links the spool, then reports failure")
	s.Reset()
	require.NoError(t, commit("s/fine"))
	require.Equal(t, 3, s.Calls(storagefault.OpPut))

	s.Inject(storagefault.Fault{Op: storagefault.OpSpool, Mode: storagefault.Before})
	require.ErrorIs(t, commit("s/no-spool"), storagefault.ErrInjected)
	require.Equal(t, 4, s.Calls(storagefault.OpSpool))
}
