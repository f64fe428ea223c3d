package service

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
)

// leaseKeeper extends the lease of one running completion (or chunk write,
// or buffer upload's write) every third of the lease, so the lease can be
// short: a holder that is killed stops extending it and the next one takes
// the upload over within the lease, however long a live holder takes.
type leaseKeeper struct {
	done  chan struct{} // closed by stop
	ended chan struct{} // closed when the heartbeat, once started, has returned
	first *time.Timer   // starts the heartbeat one beat in
	mu    sync.Mutex
	lease time.Time // the lease in force
}

// keepCompletion starts keeping the completion lease row holds (it must
// hold one).
func (s *Service) keepCompletion(ctx context.Context, row db.UploadedFile) *leaseKeeper {
	beat := s.completionBeat
	if beat <= 0 {
		beat = completionLease / 3
	}
	return s.keepLease(ctx, row.ID, *row.CompletionLeaseUntil, beat, func(held time.Time) (*time.Time, error) {
		return s.q.FileExtendCompletion(context.WithoutCancel(ctx), s.db, db.FileExtendCompletionParams{
			ID: row.ID, Lease: held, CompletionLease: completionLease, Now: s.now(),
		})
	})
}

// keepActivation starts keeping the activation lease of row, a buffer
// upload's hidden row, while its writer scans and stores the bytes: a
// writer that dies stops extending it, and its row and Idempotency-Key are
// free within ActivationLease, however long a live write takes.
func (s *Service) keepActivation(ctx context.Context, row db.UploadedFile) *leaseKeeper {
	beat := s.activationBeat
	if beat <= 0 {
		beat = ActivationLease / 3
	}
	return s.keepLease(ctx, row.ID, *row.UploadPendingAt, beat, func(held time.Time) (*time.Time, error) {
		lease, err := s.q.FileExtendActivation(context.WithoutCancel(ctx), s.db, db.FileExtendActivationParams{
			ID: row.ID, UploadMarker: held, ActivationLease: ActivationLease, Now: s.now(),
		})
		return &lease, err
	})
}

// keepLease extends the lease held on file id every beat through extend,
// which names the lease in force. An extension that fails is logged and
// retried at the next beat; one that finds the lease taken over (no rows)
// stops (the holder finds the lease lost when it ends). Most holders end
// within a beat: until the first beat the heartbeat is a timer, and its
// goroutine starts only then.
func (s *Service) keepLease(ctx context.Context, id uuid.UUID, lease time.Time, beat time.Duration, extend func(held time.Time) (*time.Time, error)) *leaseKeeper {
	k := &leaseKeeper{done: make(chan struct{}), ended: make(chan struct{}), lease: lease}
	k.first = time.AfterFunc(beat, func() {
		defer close(k.ended)
		tick := time.NewTicker(beat)
		defer tick.Stop()
		for {
			select {
			case <-k.done:
				return
			default:
			}
			// The lock is held across the extension: stop never returns
			// a lease an extension in flight is replacing.
			k.mu.Lock()
			next, err := extend(k.lease)
			if err == nil {
				k.lease = *next
			}
			k.mu.Unlock()
			switch {
			case isNoRows(err):
				return
			case err != nil:
				s.log.WarnContext(ctx, "extend lease failed; retried at the next beat", "file_id", id, "error", err.Error())
			}
			select {
			case <-k.done:
				return
			case <-tick.C:
			}
		}
	})
	return k
}

// stop ends the heartbeat (waiting for an extension in flight) and returns
// the lease in force, which the statement that ends the completion names.
func (k *leaseKeeper) stop() time.Time {
	close(k.done)
	if !k.first.Stop() {
		<-k.ended // the heartbeat started
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}
