package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// storeFaults tells the operator, once per episode, that the store failed
// for its own state -- no space, read-only, an I/O error -- rather than
// once per request: the episode starts with the first such failure and
// ends with the next write that succeeds.
type storeFaults struct {
	mu   sync.Mutex
	kind string // the episode's storage.FaultKind, "" when none runs
	err  error  // the failure that started it
}

// faultSentences are the episode's log lines, by storage.FaultKind.
var faultSentences = map[string]string{
	"no_space":  "storage: no space left on the store; uploads fail until there is room",
	"read_only": "storage: the store is read-only; uploads fail until it is writable",
	"io_error":  "storage: the store reported an I/O error; uploads may fail until it is repaired",
}

// failed records a failed store call; the first of an episode is logged
// at ERROR with its cause.
func (f *storeFaults) failed(ctx context.Context, log *slog.Logger, err error) {
	kind := storage.FaultKind(err)
	sentence, own := faultSentences[kind]
	if !own {
		return // the store did not answer: the outage's own lines say so
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kind == kind {
		return
	}
	f.kind, f.err = kind, err
	log.ErrorContext(ctx, sentence, "error", err.Error())
}

// current is the running episode as an error (nil when none runs): the
// store answers its probe, but its last write failed for its own state.
func (f *storeFaults) current() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kind == "" {
		return nil
	}
	return fmt.Errorf("the last write failed so: %w", f.err)
}

// wrote ends an episode: a write succeeded.
func (f *storeFaults) wrote(ctx context.Context, log *slog.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kind == "" {
		return
	}
	log.InfoContext(ctx, "storage: writes succeed again", "after", f.kind)
	f.kind, f.err = "", nil
}
