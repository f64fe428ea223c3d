package service

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// FindingKind names what a reconcile found.
type FindingKind string

// The findings of a reconcile.
const (
	// FindingOrphan: an object no row, claim or pending upload points to,
	// older than the grace.
	FindingOrphan FindingKind = "orphan"
	// FindingStagingLeftover: a staging object whose row is no longer
	// pending and does not keep it for the staging sweep.
	FindingStagingLeftover FindingKind = "staging-leftover"
	// FindingMissing: a visible file whose object is absent. Reported and
	// counted; never repaired by deleting the row.
	FindingMissing FindingKind = "missing"
	// FindingMismatch: a visible file whose object's size (or checksum,
	// where the listing carries it) differs from the row.
	FindingMismatch FindingKind = "mismatch"
)

// Finding is one line of a reconcile's report. Key is the storage key
// (reconcile is an operator's tool, never served over HTTP).
type Finding struct {
	Kind         FindingKind `json:"kind"`
	Key          string      `json:"key"`
	FileID       *uuid.UUID  `json:"fileId,omitempty"`
	Size         int64       `json:"size"`
	ExpectedSize int64       `json:"expectedSize,omitempty"`
	LastModified *time.Time  `json:"lastModified,omitempty"`
	Detail       string      `json:"detail,omitempty"`
	// Repaired: --repair deleted the object through a durable claim.
	Repaired bool `json:"repaired,omitempty"`
}

// ReconcileOptions configure UnsafeSystemReconcile.
type ReconcileOptions struct {
	// Prefix restricts the reconcile to keys that start with it.
	Prefix string
	// Grace: objects younger than this are never reported as orphans or
	// leftovers, nor touched (an upload may be writing them).
	Grace time.Duration
	// Repair deletes orphans and staging leftovers through durable claims.
	Repair bool
	// After resumes an interrupted reconcile of the same options: only
	// keys after it are listed and read (ReconcileCounts.Last of the run
	// that stopped).
	After string
	// Progress, when set, is told how many objects the walk has done and
	// the last of them, every reconcileProgressEvery objects: every key up
	// to last is done, objects and references alike.
	Progress func(objects int64, last string)
}

// reconcileProgressEvery is how many objects a reconcile lists between two
// calls of its Progress.
const reconcileProgressEvery = 1000

// ReconcileCounts is what a reconcile saw and did.
type ReconcileCounts struct {
	Objects          int64 `json:"objects"`
	References       int64 `json:"references"`
	Orphans          int64 `json:"orphans"`
	StagingLeftovers int64 `json:"stagingLeftovers"`
	Missing          int64 `json:"missing"`
	Mismatches       int64 `json:"mismatches"`
	Young            int64 `json:"young"`
	Repaired         int64 `json:"repaired"`
	RepairFailed     int64 `json:"repairFailed"`
	// Interrupted: the caller's context ended before the walk did; the
	// object in hand was finished, and Last is where to resume (After).
	Interrupted bool `json:"-"`
	// Last is the last key done. Neither is one of the counts: the
	// command reports both beside them.
	Last string `json:"-"`
}

// errReconcileStopped ends the listing of an interrupted reconcile.
var errReconcileStopped = errors.New("reconcile interrupted")

// reconcilePage is how many references one query reads.
const reconcilePage = 1000

// UnsafeSystemReconcile compares the store with the rows: it streams the
// store's listing and every storage reference of the rows, both in byte
// order of the keys, and merge-joins them, so memory does not grow with
// the number of objects. emit receives each finding as it is found (its
// error stops the run). With opts.Repair, orphans and staging leftovers
// older than the grace are deleted through durable claims (the claim is
// written, re-checking that no row owns the key, before the storage
// delete; a crash leaves the claim to the pending sweep); missing objects
// are only reported. When ctx ends, the object in hand is finished and the
// counts say where the walk stopped (Interrupted, Last: resume with
// After). Cross-tenant; trusted operators only.
func (s *Service) UnsafeSystemReconcile(ctx context.Context, opts ReconcileOptions, emit func(Finding) error) (ReconcileCounts, error) {
	start, err := s.dbNow(ctx)
	if err != nil {
		return ReconcileCounts{}, s.internalError(ctx, ErrCleanupFailed, "reconcile: read the database clock", err)
	}
	work := context.WithoutCancel(ctx) // an object begun is finished, its repair included
	m := &merge{ctx: work, s: s, opts: opts, emit: emit, start: start, next: max(opts.Prefix, opts.After), last: opts.After}
	m.counts.Last = opts.After
	err = s.store.List(work, opts.Prefix, opts.After, func(oi storage.ObjectInfo) error {
		if ctx.Err() != nil {
			return errReconcileStopped
		}
		if err := m.object(oi); err != nil {
			return err
		}
		m.counts.Last = oi.Key
		if opts.Progress != nil && m.counts.Objects%reconcileProgressEvery == 0 {
			opts.Progress(m.counts.Objects, oi.Key)
		}
		return nil
	})
	if errors.Is(err, errReconcileStopped) {
		m.counts.Interrupted = true
		return m.counts, nil
	}
	if err != nil {
		return m.counts, m.fail(ctx, "list the store", err)
	}
	if err := m.rest(work); err != nil {
		return m.counts, m.fail(ctx, "read the references", err)
	}
	return m.counts, nil
}

// dbNow is the database clock (or the pinned test clock).
func (s *Service) dbNow(ctx context.Context) (time.Time, error) {
	if t := s.now(); t != nil {
		return *t, nil
	}
	return s.q.DatabaseNow(ctx, s.db)
}

// merge is one reconcile's merge-join: the store's listing is pushed into
// object, the references are pulled a page at a time.
type merge struct {
	ctx    context.Context
	s      *Service
	opts   ReconcileOptions
	emit   func(Finding) error
	start  time.Time
	page   []db.ReconcileReferencesFromRow
	next   string // where the next page starts
	last   string // the last reference read (dropped from the next page)
	done   bool   // no reference left under the prefix
	counts ReconcileCounts
	emitEr error
}

// fail keeps an emit error as it is and maps anything else.
func (m *merge) fail(ctx context.Context, what string, err error) error {
	if m.emitEr != nil {
		return m.emitEr
	}
	return m.s.internalError(ctx, ErrCleanupFailed, "reconcile: "+what, err)
}

// peek returns the next reference under the prefix, reading a page when
// needed; ok is false when none is left.
func (m *merge) peek(ctx context.Context) (db.ReconcileReferencesFromRow, bool, error) {
	for len(m.page) == 0 && !m.done {
		rows, err := m.s.q.ReconcileReferencesFrom(ctx, m.s.db, db.ReconcileReferencesFromParams{StartKey: m.next, Max: reconcilePage})
		if err != nil {
			return db.ReconcileReferencesFromRow{}, false, err
		}
		m.done = len(rows) < reconcilePage
		if len(rows) > 0 && rows[0].Ref == m.last {
			rows = rows[1:]
		}
		if len(rows) > 0 {
			m.next, m.last = rows[len(rows)-1].Ref, rows[len(rows)-1].Ref
		}
		for i, r := range rows {
			if !strings.HasPrefix(r.Ref, m.opts.Prefix) {
				rows, m.done = rows[:i], true
				break
			}
		}
		m.page = rows
	}
	if len(m.page) == 0 {
		return db.ReconcileReferencesFromRow{}, false, nil
	}
	return m.page[0], true, nil
}

// object is called for each listed object, in key order.
func (m *merge) object(oi storage.ObjectInfo) error {
	ctx := m.ctx
	m.counts.Objects++
	for {
		ref, ok, err := m.peek(ctx)
		if err != nil {
			return err
		}
		if !ok || ref.Ref > oi.Key {
			return m.unowned(ctx, oi, nil)
		}
		m.page = m.page[1:]
		m.counts.References++
		if ref.Ref < oi.Key {
			if err := m.absent(ref); err != nil {
				return err
			}
			continue
		}
		if !ref.Owned {
			return m.unowned(ctx, oi, &ref)
		}
		return m.present(oi, ref)
	}
}

// rest reads the references after the last listed object: each visible
// file among them has no object.
func (m *merge) rest(ctx context.Context) error {
	for {
		ref, ok, err := m.peek(ctx)
		if err != nil || !ok {
			return err
		}
		m.page = m.page[1:]
		m.counts.References++
		if err := m.absent(ref); err != nil {
			return err
		}
	}
}

// absent handles a reference the listing does not have: missing when its
// file is visible, was so before the reconcile began, and still is with no
// object now (the row and the store are read again: a file deleted while
// the walk went on, or an object the listing passed before it was written,
// is not missing).
func (m *merge) absent(ref db.ReconcileReferencesFromRow) error {
	ctx := m.ctx
	if !ref.Visible || !ref.UpdatedAt.Before(m.start) {
		return nil
	}
	cur, err := m.current(ctx, ref.Ref)
	if err != nil || cur == nil || !cur.Visible {
		return err
	}
	if _, exists, err := m.stat(ctx, ref.Ref, storage.ObjectInfo{Key: ref.Ref}); err != nil || exists {
		return err
	}
	m.counts.Missing++
	return m.report(Finding{Kind: FindingMissing, Key: ref.Ref, FileID: &ref.ID, ExpectedSize: ref.SizeBytes, Detail: "a visible file has no object"})
}

// present compares a visible file's object with its row; a difference is
// reported only when it holds on a second read of both (a file deleted and
// its key's object gone since the listing is no mismatch).
func (m *merge) present(oi storage.ObjectInfo, ref db.ReconcileReferencesFromRow) error {
	ctx := m.ctx
	if !ref.Visible || mismatch(oi, ref) == "" {
		return nil
	}
	cur, err := m.current(ctx, oi.Key)
	if err != nil || cur == nil || !cur.Visible {
		return err
	}
	now, exists, err := m.stat(ctx, oi.Key, oi)
	if err != nil || !exists {
		return err
	}
	if now.SHA256 == nil {
		now.SHA256 = oi.SHA256 // a Stat need not carry the listing's checksum
	}
	detail := mismatch(now, *cur)
	if detail == "" {
		return nil
	}
	m.counts.Mismatches++
	return m.report(Finding{Kind: FindingMismatch, Key: oi.Key, FileID: &cur.ID, Size: now.Size, ExpectedSize: cur.SizeBytes, LastModified: &now.LastModified, Detail: detail})
}

// mismatch names how an object differs from its visible row ("" when it
// does not).
func mismatch(oi storage.ObjectInfo, ref db.ReconcileReferencesFromRow) string {
	switch {
	case oi.Size != ref.SizeBytes:
		return "size differs from the row"
	case oi.SHA256 != nil && ref.Checksum != nil && !checksumIs(*ref.Checksum, oi.SHA256):
		return "checksum differs from the row"
	}
	return ""
}

// current reads @key's reference again, now; nil when no row refers to it.
func (m *merge) current(ctx context.Context, key string) (*db.ReconcileReferencesFromRow, error) {
	rows, err := m.s.q.ReconcileReferencesFrom(ctx, m.s.db, db.ReconcileReferencesFromParams{StartKey: key, Max: 1})
	if err != nil || len(rows) == 0 || rows[0].Ref != key {
		return nil, err
	}
	return &rows[0], nil
}

// stat reads @key's object again, now; exists is false when it is gone.
// An object the driver cannot describe (a file it did not write, without
// its checksum attribute) exists as listed.
func (m *merge) stat(ctx context.Context, key string, listed storage.ObjectInfo) (storage.ObjectInfo, bool, error) {
	oi, err := m.s.store.Stat(ctx, key)
	switch {
	case err == nil:
		return oi, true, nil
	case errors.Is(err, storage.ErrNotFound):
		return storage.ObjectInfo{}, false, nil
	case errors.Is(err, storage.ErrUnavailable), ctx.Err() != nil:
		return storage.ObjectInfo{}, false, err
	default:
		return listed, true, nil
	}
}

func checksumIs(declared string, sum []byte) bool {
	want, err := parseChecksum(declared)
	return err == nil && bytes.Equal(want, sum)
}

// unowned handles an object no row owned when its references were read:
// an orphan (a staging leftover when a row once had it as its staging
// key), reported once older than the grace, and only when, read again now,
// no row owns it and the object still exists (an upload that began, or a
// deletion that finished, while the walk went on is no orphan). With
// Repair it is deleted through a durable claim; a claim refused because a
// row has come to own the key is no finding either.
func (m *merge) unowned(ctx context.Context, oi storage.ObjectInfo, ref *db.ReconcileReferencesFromRow) error {
	if m.opts.Grace > 0 && m.start.Sub(oi.LastModified) < m.opts.Grace {
		m.counts.Young++
		return nil
	}
	if claimed, err := m.s.q.OrphanIsClaimed(ctx, m.s.db, oi.Key); err != nil || claimed {
		return err // a repair is deleting it already
	}
	cur, err := m.current(ctx, oi.Key)
	if err != nil || (cur != nil && cur.Owned) {
		return err
	}
	if _, exists, err := m.stat(ctx, oi.Key, oi); err != nil || !exists {
		return err
	}
	f := Finding{Kind: FindingOrphan, Key: oi.Key, Size: oi.Size, LastModified: &oi.LastModified, Detail: "no row owns this object"}
	if cur != nil {
		f.FileID = &cur.ID
		f.Detail = "its row no longer owns it"
		if cur.Staging {
			f.Kind, f.Detail = FindingStagingLeftover, "a staging object whose upload is over"
		}
	}
	if m.opts.Repair {
		repaired, owned := m.s.repairOrphan(ctx, oi.Key)
		if owned {
			return nil
		}
		f.Repaired = repaired
		if repaired {
			m.counts.Repaired++
		} else {
			m.counts.RepairFailed++
		}
	}
	if f.Kind == FindingOrphan {
		m.counts.Orphans++
	} else {
		m.counts.StagingLeftovers++
	}
	return m.report(f)
}

func (m *merge) report(f Finding) error {
	if m.emit == nil {
		return nil
	}
	if err := m.emit(f); err != nil {
		m.emitEr = err
		return err
	}
	return nil
}

// repairOrphan deletes an orphan object through a durable claim: the claim
// (refused when a row owns the key) before the delete, its removal after.
// A failed delete releases the claim to a retry marker; the pending sweep
// finishes it, as it finishes the claim of a repair that died. owned
// reports a claim refused because a row owns the key (or another repair
// holds it): nothing to repair.
func (s *Service) repairOrphan(ctx context.Context, key string) (repaired, owned bool) {
	claim, err := s.q.OrphanClaim(ctx, s.db, db.OrphanClaimParams{Key: key, Lease: deletionLease, Now: s.now()})
	if isNoRows(err) {
		return false, true
	}
	if err != nil {
		s.log.ErrorContext(ctx, "reconcile: claim orphan", "error", err.Error())
		return false, false
	}
	return s.finishOrphan(ctx, claim), false
}

// finishOrphan deletes a claimed orphan and settles its claim, or releases
// the claim when the delete fails.
func (s *Service) finishOrphan(ctx context.Context, c db.UploadedFileOrphanClaim) bool {
	if err := s.store.Delete(ctx, c.Key); err != nil {
		s.log.WarnContext(ctx, "delete orphan object failed; released for retry", "error", err.Error())
		if _, err := s.q.OrphanRelease(ctx, s.db, db.OrphanReleaseParams{Key: c.Key, Claim: c.ClaimedUntil, Backoff: DeletionRetryBackoff, Now: s.now()}); err != nil && !isNoRows(err) {
			s.log.ErrorContext(ctx, "release orphan claim", "error", err.Error())
		}
		return false
	}
	_, err := s.q.OrphanSettle(ctx, s.db, db.OrphanSettleParams{Key: c.Key, Claim: c.ClaimedUntil})
	if err != nil && !isNoRows(err) {
		s.log.ErrorContext(ctx, "settle orphan claim", "error", err.Error())
		return false
	}
	return true
}

// retryOrphanClaims finishes orphan claims whose repair died or whose
// delete failed (lease or retry marker elapsed), at most max; it reports
// how many it claimed.
func (s *Service) retryOrphanClaims(ctx context.Context, max int) (done, claimed int, err error) {
	claims, err := s.q.OrphanClaimElapsed(ctx, s.db, db.OrphanClaimElapsedParams{Max: int32(max), Lease: deletionLease, Now: s.now()})
	if err != nil {
		return 0, 0, s.internalError(ctx, ErrCleanupFailed, "claim elapsed orphan repairs", err)
	}
	for _, c := range claims {
		if s.finishOrphan(ctx, c) {
			done++
		}
	}
	recordSweep(ctx, len(claims), done)
	return done, len(claims), nil
}
