package service

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
)

// Idempotency keys (the IETF httpapi draft's Idempotency-Key): the HTTP
// layer claims a key for a write, runs it, and records its answer; a retry
// replays the answer. The rows live in uploaded_file_idempotency, scoped by
// the caller's tenant and user (db/queries/idempotency.sql).

// IdempotencyRetention is how long a key is remembered after its claim.
const IdempotencyRetention = 24 * time.Hour

// IdempotencyLease is how long a claim holds without a heartbeat: a
// request whose process died frees its key this long after its last
// heartbeat (Heartbeat, every IdempotencyLease/3).
const IdempotencyLease = 30 * time.Second

// IdempotencyState is what a key holds when a request claims it.
type IdempotencyState int

// The states of a key.
const (
	// KeyClaimed: the key was free; this request holds it.
	KeyClaimed IdempotencyState = iota
	// KeyTakenOver: the request that held the key died (its lease ran
	// out); this request holds it now, and PreviousFileID names the file
	// the dead one was creating, if any.
	KeyTakenOver
	// KeyRunning: another request holds the key and is still running;
	// FileID names the file it is creating, if any.
	KeyRunning
	// KeyDone: the key's answer is recorded (Answer).
	KeyDone
	// KeyOnFile: the key names a file a buffer upload of the caller made
	// (its key lives on the file's row, WithUploadKey): this request is
	// another one.
	KeyOnFile
)

// IdempotencyKey is a claimed or recorded key of the caller in ctx.
type IdempotencyKey struct {
	State IdempotencyState
	// FileID: the id the claiming request's file must get (WithNewFileID),
	// or, for KeyRunning, the id of the file the running request creates.
	FileID *uuid.UUID
	// PreviousFileID: for KeyTakenOver, the file the dead request was
	// creating.
	PreviousFileID *uuid.UUID
	// FirstClaimed: for KeyTakenOver, when the key was first claimed (the
	// dead request's writes are no older).
	FirstClaimed time.Time
	// Route is the route the key was first used on.
	Route string
	// RetryAfter: for KeyRunning, how long until its lease runs out.
	RetryAfter time.Duration
	// Answer: for KeyDone, the recorded answer.
	Answer IdempotentAnswer
	// Department is the caller's department ("" without one): part of
	// what makes two requests under the key the same request.
	Department string

	claim          time.Time
	tenant, caller string
	key            string
	createsFile    bool
	service        *Service
}

// IdempotentAnswer is a recorded answer, with the fingerprint of the
// request it answered.
type IdempotentAnswer struct {
	Fingerprint []byte
	Status      int
	ContentType string
	Body        []byte
}

// ClaimIdempotencyKey claims key for the caller in ctx on route: a free key
// (or one whose request died) is claimed for this request, with a new file
// id when createsFile; otherwise the key's state is returned as it is
// (KeyRunning, KeyDone). A caller without a scope is ErrNotFound; a
// database that does not answer, ErrUnavailable.
func (s *Service) ClaimIdempotencyKey(ctx context.Context, key, route string, createsFile bool) (*IdempotencyKey, error) {
	a, err := s.authorize(ctx, OpRead, nil, nil)
	if err != nil {
		return nil, err
	}
	k := &IdempotencyKey{tenant: a.scope.TenantCode, caller: a.scope.UserID, key: key, createsFile: createsFile, service: s, Route: route,
		Department: deref(a.scope.DepartmentCode)}
	onFile, err := s.q.IdempotencyKeyOnFile(ctx, s.db, db.IdempotencyKeyOnFileParams{TenantCode: k.tenant, Caller: k.caller, Key: key})
	if err != nil {
		return nil, s.internalError(ctx, ErrUploadFailed, "read idempotency key", err)
	}
	if onFile {
		k.State = KeyOnFile
		return k, nil
	}
	for range 3 { // a key that expires or is taken over between two reads is looked at again
		id := k.newID()
		claimed, err := s.q.IdempotencyClaim(ctx, s.keysDB, db.IdempotencyClaimParams{
			TenantCode: k.tenant, Caller: k.caller, Key: key, Route: route, FileID: id,
			Lease: IdempotencyLease, Retention: IdempotencyRetention, Now: s.now(),
		})
		if err == nil {
			k.State, k.FileID, k.claim = KeyClaimed, claimed.FileID, *claimed.LeaseUntil
			return k, nil
		}
		if !isNoRows(err) {
			return nil, s.internalError(ctx, ErrUploadFailed, "claim idempotency key", err)
		}
		row, err := s.q.IdempotencyGet(ctx, s.db, db.IdempotencyGetParams{TenantCode: k.tenant, Caller: k.caller, Key: key, Now: s.now()})
		switch {
		case isNoRows(err):
			continue // expired meanwhile: claim it
		case err != nil:
			return nil, s.internalError(ctx, ErrUploadFailed, "read idempotency key", err)
		}
		k.Route = row.Route
		if row.State == "done" {
			k.State = KeyDone
			k.Answer = IdempotentAnswer{Fingerprint: row.Fingerprint, Status: int(deref(row.Status)), ContentType: deref(row.ContentType), Body: row.Body}
			return k, nil
		}
		if row.LeaseUntil.After(row.DBNow) {
			k.State, k.FileID, k.RetryAfter = KeyRunning, row.FileID, row.LeaseUntil.Sub(row.DBNow)
			return k, nil
		}
		taken, err := s.q.IdempotencyTakeOver(ctx, s.keysDB, db.IdempotencyTakeOverParams{
			TenantCode: k.tenant, Caller: k.caller, Key: key, Expired: *row.LeaseUntil, FileID: id,
			Lease: IdempotencyLease, Now: s.now(),
		})
		switch {
		case isNoRows(err):
			continue // another retry took it, or it finished: look again
		case err != nil:
			return nil, s.internalError(ctx, ErrUploadFailed, "take over idempotency key", err)
		}
		k.State, k.FileID, k.PreviousFileID, k.claim = KeyTakenOver, id, taken.PreviousFileID, *taken.LeaseUntil
		k.FirstClaimed = taken.FirstClaimed
		return k, nil
	}
	return nil, ErrUploadCompleting // the key kept changing under us: retry later
}

func (k *IdempotencyKey) newID() *uuid.UUID {
	if !k.createsFile {
		return nil
	}
	id := newTimeOrderedID()
	return &id
}

// Heartbeat extends a held claim by IdempotencyLease. False: the claim was
// lost (taken over by a retry that found the lease run out).
func (k *IdempotencyKey) Heartbeat(ctx context.Context) bool {
	s := k.service
	next, err := s.q.IdempotencyExtend(ctx, s.keysDB, db.IdempotencyExtendParams{
		TenantCode: k.tenant, Caller: k.caller, Key: k.key, Claim: k.claim, Lease: IdempotencyLease, Now: s.now(),
	})
	if err != nil {
		return false
	}
	k.claim = *next
	return true
}

// Finish records the answer of the request that holds the key. False: the
// claim was lost meanwhile, and nothing was recorded.
func (k *IdempotencyKey) Finish(ctx context.Context, a IdempotentAnswer) bool {
	s := k.service
	var ct *string
	if a.ContentType != "" {
		ct = &a.ContentType
	}
	_, err := s.q.IdempotencyFinish(ctx, s.keysDB, db.IdempotencyFinishParams{
		TenantCode: k.tenant, Caller: k.caller, Key: k.key, Claim: k.claim,
		Fingerprint: a.Fingerprint, Status: int32(a.Status), ContentType: ct, Body: a.Body,
	})
	if err != nil && !isNoRows(err) {
		s.log.WarnContext(ctx, "record idempotency key", "error", err.Error())
	}
	return err == nil
}

// Release gives the key back after a failure that can be retried: the
// next request with it runs again.
func (k *IdempotencyKey) Release(ctx context.Context) {
	s := k.service
	if err := s.q.IdempotencyRelease(ctx, s.keysDB, db.IdempotencyReleaseParams{TenantCode: k.tenant, Caller: k.caller, Key: k.key, Claim: k.claim}); err != nil {
		s.log.WarnContext(ctx, "release idempotency key", "error", err.Error())
	}
}

// UnsafeSystemExpireIdempotencyKeys deletes up to max keys claimed more
// than IdempotencyRetention ago and returns how many went (the temporary
// track runs it).
func (s *Service) UnsafeSystemExpireIdempotencyKeys(ctx context.Context, max int) (int, error) {
	n, err := s.q.IdempotencyExpire(ctx, s.db, db.IdempotencyExpireParams{Max: int32(max), Now: s.now()})
	if err != nil {
		return 0, s.internalError(ctx, ErrCleanupFailed, "expire idempotency keys", err)
	}
	return int(n), nil
}

type newFileIDKey struct{}

// WithNewFileID makes id the id of the file the next upload, clone or
// initiate under ctx creates (an idempotent request names its file before
// it writes anything, so a retry after a crash can find it). An id that is
// already taken fails that call.
func WithNewFileID(ctx context.Context, id uuid.UUID) context.Context {
	return context.WithValue(ctx, newFileIDKey{}, id)
}

// newFileID is the id a new file under ctx gets: WithNewFileID's, or a
// new time-ordered one.
func newFileID(ctx context.Context) uuid.UUID {
	if id, ok := ctx.Value(newFileIDKey{}).(uuid.UUID); ok {
		return id
	}
	return newTimeOrderedID()
}
