package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// RescanOptions select the files a rescan reads and how it reads them.
type RescanOptions struct {
	// Since: only files created at or after it (nil: every file).
	Since *time.Time
	// Tenant: only this tenant's files (empty: every tenant).
	Tenant string
	// Quarantine hides each detected file from every read.
	Quarantine bool
	// Concurrency is how many files are scanned at once, each on a clamd
	// stream of its own (at least 1).
	Concurrency int
	// Retries is how many more times a file the scanner gives no verdict
	// for is sent before it is reported (NoVerdict) and the rescan goes on.
	Retries int
	// NoVerdict is told of each file the scanner gave no verdict for, after
	// its retries (nil: counted only).
	NoVerdict func(NoVerdict)
	// Progress is told how many files are done (scanned or reported) each
	// time one is (nil: nothing), from one goroutine at a time.
	Progress func(done int)
	// After and DoneAbove resume an interrupted rescan: files at or before
	// After in id order, and those of DoneAbove, are not read again.
	After     uuid.UUID
	DoneAbove []uuid.UUID
	// Checkpoint is told where the rescan stands -- every file at or
	// before after done, and doneAbove past it -- every checkpointEvery
	// files and when it stops (nil: nothing), from one goroutine at a time.
	Checkpoint func(after uuid.UUID, doneAbove []uuid.UUID)
}

// Detection is a ready file in which a rescan found malware.
type Detection struct {
	ID          uuid.UUID
	Tenant      string
	Signature   string
	Quarantined bool
}

// NoVerdict is a file a rescan could not judge: the scanner failed on it
// every time it was sent.
type NoVerdict struct {
	ID     uuid.UUID
	Tenant string
	Err    error
}

// RescanReport counts what a rescan did.
type RescanReport struct {
	Scanned, Detected, Quarantined, Unscanned int
	// Interrupted: the caller's context ended before the last file; the
	// files in flight were finished and Checkpoint was told where it
	// stopped.
	Interrupted bool
}

// checkpointEvery is how many files a rescan does between two
// checkpoints: a crash repeats at most that many.
const checkpointEvery = 100

// ErrNoScanner refuses a rescan without a scanner (scan.clamd).
var ErrNoScanner = errors.New("uploadedfile: no scanner configured (scan.clamd)")

// rescanGiveUp is how many files in a row without a verdict stop a rescan:
// then the scanner is down, not troubled by one file.
const rescanGiveUp = 5

// UnsafeSystemRescan scans every ready file that o selects again (after a
// signature update), o.Concurrency at a time, calls found for each
// detection, and with o.Quarantine moves it to quarantine (each as it is
// found): hidden from every read exactly as a missing file is, its bytes
// kept, a file.quarantined event emitted. A file the scanner gives no
// verdict for is sent again o.Retries times, then reported to o.NoVerdict,
// counted, and passed; rescanGiveUp such files in a row stop the rescan
// with the scanner's error, as does a database or store failure. Run again,
// it is idempotent. Cross-tenant; trusted operators only.
func (s *Service) UnsafeSystemRescan(ctx context.Context, o RescanOptions, found func(Detection)) (RescanReport, error) {
	if s.scanner == nil {
		return RescanReport{}, ErrNoScanner
	}
	// The files in flight finish whatever ctx does (an interrupt stops
	// only what is sent next); a worker's failure stops everything.
	run, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	r := &rescan{svc: s, o: o, found: found, stop: cancel, skip: map[uuid.UUID]bool{}}
	for _, id := range o.DoneAbove {
		r.skip[id] = true
	}
	files := make(chan db.UploadedFile)
	var wg sync.WaitGroup
	for range max(o.Concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for row := range files {
				r.one(run, row)
			}
		}()
	}
	err := r.feed(ctx, run, files)
	close(files)
	wg.Wait()
	if cause := context.Cause(run); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	r.rep.Interrupted = err == nil && ctx.Err() != nil
	r.checkpoint()
	return r.rep, err
}

// UnsafeSystemRescanEstimate is about how many files a rescan with o
// reads -- after o.After when it resumes one -- the planner's estimate
// (nothing is read), a progress display's total.
func (s *Service) UnsafeSystemRescanEstimate(ctx context.Context, o RescanOptions) (int64, error) {
	n, err := db.EstimateRescan(ctx, s.db, o.After, o.Since, optional(o.Tenant))
	if err != nil {
		return 0, s.internalError(ctx, ErrCleanupFailed, "estimate the rescan", err)
	}
	return n, nil
}

// rescan is one run's state: its report and its run of files without a
// verdict, shared by its workers.
type rescan struct {
	svc   *Service
	o     RescanOptions
	found func(Detection)
	stop  context.CancelCauseFunc

	mu      sync.Mutex
	rep     RescanReport
	missing int // files without a verdict in a row
	// skip are the files a resumed rescan does not read again; queue the
	// files sent, in id order, and done those of them finished.
	skip  map[uuid.UUID]bool
	queue []uuid.UUID
	done  map[uuid.UUID]bool
	after uuid.UUID
	since int // files done since the last checkpoint
}

// feed sends the selected files, in id order from o.After, until they are
// all sent, ctx ends (an interrupt) or run does (a worker's failure).
func (r *rescan) feed(ctx, run context.Context, files chan<- db.UploadedFile) error {
	r.after = r.o.After
	next := r.o.After
	for {
		l, err := r.batch(run, next)
		if err != nil {
			if run.Err() != nil {
				return nil // stopped by a worker: its cause is the answer
			}
			return r.svc.internalError(run, ErrCleanupFailed, "list files to rescan", err)
		}
		for _, row := range l.rows {
			if r.skip[row.ID] {
				continue
			}
			if ctx.Err() != nil || run.Err() != nil {
				return nil
			}
			r.sent(row.ID)
			select {
			case files <- row:
			case <-ctx.Done():
				r.unsent(row.ID)
				return nil
			case <-run.Done():
				r.unsent(row.ID)
				return nil
			}
		}
		last := l.spent
		if last == nil && len(l.rows) == rescanBatch {
			last = &l.rows[len(l.rows)-1]
		}
		if last == nil {
			return nil // the walk reached the end
		}
		next = last.ID
	}
}

// sent records id as sent to a worker, in id order.
func (r *rescan) sent(id uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, id)
}

// unsent takes back the last id sent: no worker took it.
func (r *rescan) unsent(id uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.queue); n > 0 && r.queue[n-1] == id {
		r.queue = r.queue[:n-1]
	}
}

// finished records id as done and moves the checkpoint past every file
// done in a row from its front (the caller holds mu).
func (r *rescan) finished(id uuid.UUID) {
	if r.done == nil {
		r.done = map[uuid.UUID]bool{}
	}
	r.done[id] = true
	for len(r.queue) > 0 && r.done[r.queue[0]] {
		r.after = r.queue[0]
		delete(r.done, r.queue[0])
		r.queue = r.queue[1:]
	}
	if r.since++; r.since >= checkpointEvery {
		r.since = 0
		r.checkpointLocked()
	}
}

// checkpoint tells o.Checkpoint where the rescan stands.
func (r *rescan) checkpoint() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkpointLocked()
}

func (r *rescan) checkpointLocked() {
	if r.o.Checkpoint == nil {
		return
	}
	above := make([]uuid.UUID, 0, len(r.done)+len(r.o.DoneAbove))
	for id := range r.done {
		above = append(above, id)
	}
	for _, id := range r.o.DoneAbove {
		if bytes.Compare(id[:], r.after[:]) > 0 {
			above = append(above, id) // done by the run before, not yet passed
		}
	}
	r.o.Checkpoint(r.after, above)
}

// one scans row, with its retries, and records the outcome.
func (r *rescan) one(ctx context.Context, row db.UploadedFile) {
	var d *Detection
	var err error
	for try := 0; try <= r.o.Retries; try++ {
		if d, err = r.svc.rescanOne(ctx, row, r.o.Quarantine); !errors.Is(err, errNoVerdict) || ctx.Err() != nil {
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() == nil && (err == nil || errors.Is(err, errNoVerdict)) {
		defer r.finished(row.ID)
	}
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, errNoVerdict):
		r.rep.Unscanned++
		r.missing++
		if r.o.NoVerdict != nil {
			r.o.NoVerdict(NoVerdict{ID: row.ID, Tenant: row.TenantCode, Err: errors.Unwrap(err)})
		}
		if r.missing >= rescanGiveUp {
			r.stop(fmt.Errorf("rescan: %d files in a row without a verdict: %w", r.missing, errors.Unwrap(err)))
		}
	case err != nil:
		r.stop(err)
	default:
		r.missing = 0
		r.rep.Scanned++
		if d != nil {
			r.rep.Detected++
			if d.Quarantined {
				r.rep.Quarantined++
			}
			r.found(*d)
		}
	}
	if r.o.Progress != nil && ctx.Err() == nil {
		r.o.Progress(r.rep.Scanned + r.rep.Unscanned)
	}
}

// errNoVerdict wraps a scanner's failure on one file.
var errNoVerdict = errors.New("no verdict")

type noVerdictError struct{ err error }

func (e *noVerdictError) Error() string        { return "no verdict: " + e.err.Error() }
func (e *noVerdictError) Unwrap() error        { return e.err }
func (e *noVerdictError) Is(target error) bool { return target == errNoVerdict }

// rescanOne scans one stored file; a detection is returned, quarantined
// when asked. The scanner's failure is a *noVerdictError.
func (s *Service) rescanOne(ctx context.Context, row db.UploadedFile, quarantine bool) (*Detection, error) {
	body, err := s.store.Open(ctx, row.Key, nil)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil // deleted meanwhile (or lost: reconcile reports it)
	}
	if err != nil {
		return nil, s.internalError(ctx, ErrCleanupFailed, "open file to rescan", err, "file_id", row.ID)
	}
	defer body.Close()
	v, err := s.scanner(ctx, body)
	if err != nil {
		return nil, &noVerdictError{err: fmt.Errorf("rescan %s: %w", row.ID, err)}
	}
	if !v.Infected && !v.Unscannable {
		return nil, nil
	}
	s.log.WarnContext(ctx, "malware (or content the scanner cannot judge) found by a rescan", "file_id", row.ID, "tenant", row.TenantCode, "signature", v.Signature)
	d := &Detection{ID: row.ID, Tenant: row.TenantCode, Signature: v.Signature}
	if quarantine {
		_, err := s.q.FileQuarantine(ctx, s.db, db.FileQuarantineParams{ID: row.ID, Now: s.now()})
		switch {
		case err == nil:
			d.Quarantined = true
		case !isNoRows(err):
			return nil, s.internalError(ctx, ErrCleanupFailed, "quarantine file", err, "file_id", row.ID)
		}
	}
	return d, nil
}

// Bounds of the rescan's reading: files a batch, and files one statement
// reads at most to find them (a --since that few files match costs one
// budget a statement, not a read of the table).
const (
	rescanBatch  = 100
	rescanBudget = 10_000
)

// batch is the next rescanBatch selected files after the id, and the file
// its walk ended on when the budget ran out first: one tenant's through
// its own statement and index, or every tenant's.
func (r *rescan) batch(ctx context.Context, after uuid.UUID) (listed, error) {
	if r.o.Tenant != "" {
		rows, err := r.svc.q.FileRescanTenantBatch(ctx, r.svc.db, db.FileRescanTenantBatchParams{
			Tenant: r.o.Tenant, AfterID: after, Since: r.o.Since, Scan: rescanBudget, Max: rescanBatch,
		})
		return walkedWithin(rescanBudget, rows, err)
	}
	rows, err := r.svc.q.FileRescanBatch(ctx, r.svc.db, db.FileRescanBatchParams{
		AfterID: after, Since: r.o.Since, Scan: rescanBudget, Max: rescanBatch,
	})
	return walkedWithin(rescanBudget, rows, err)
}
