package service

import (
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
}

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
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &rescan{svc: s, o: o, found: found, stop: cancel}
	files := make(chan db.UploadedFile)
	var wg sync.WaitGroup
	for range max(o.Concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for row := range files {
				r.one(ctx, row)
			}
		}()
	}
	err := r.feed(ctx, files)
	close(files)
	wg.Wait()
	if cause := context.Cause(ctx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return r.rep, err
}

// UnsafeSystemRescanEstimate is about how many files a rescan with o
// reads: the planner's estimate (nothing is read), a progress display's
// total.
func (s *Service) UnsafeSystemRescanEstimate(ctx context.Context, o RescanOptions) (int64, error) {
	n, err := db.EstimateRescan(ctx, s.db, db.FileRescanBatchParams{AfterID: uuid.Nil, Since: o.Since, Tenant: optional(o.Tenant)})
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
}

// feed sends the selected files, in id order, until they are all sent or
// ctx ends.
func (r *rescan) feed(ctx context.Context, files chan<- db.UploadedFile) error {
	after := uuid.Nil
	for {
		rows, err := r.svc.q.FileRescanBatch(ctx, r.svc.db, db.FileRescanBatchParams{AfterID: after, Since: r.o.Since, Tenant: optional(r.o.Tenant), Max: 100})
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped by a worker: its cause is the answer
			}
			return r.svc.internalError(ctx, ErrCleanupFailed, "list files to rescan", err)
		}
		for _, row := range rows {
			select {
			case files <- row:
			case <-ctx.Done():
				return nil
			}
		}
		if len(rows) < 100 {
			return nil
		}
		after = rows[len(rows)-1].ID
	}
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
