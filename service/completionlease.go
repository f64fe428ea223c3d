package service

import (
	"context"
	"sync"
	"time"

	"github.com/uploadedfile/uploadedfile/db"
)

// leaseKeeper extends the completion lease of one running completion every
// completionLease/3, so the lease can be short: a completer that is killed
// stops extending it and the next complete takes the upload over within
// completionLease, however long a live completion takes.
type leaseKeeper struct {
	done  chan struct{} // closed by stop
	ended chan struct{} // closed when the heartbeat has returned
	mu    sync.Mutex
	lease time.Time // the lease in force
}

// keepCompletion starts keeping the lease row holds (it must hold one).
// An extension that fails is logged and retried at the next beat; one
// that finds the lease taken over stops (the completion will find it lost
// when it ends).
func (s *Service) keepCompletion(ctx context.Context, row db.UploadedFile) *leaseKeeper {
	k := &leaseKeeper{done: make(chan struct{}), ended: make(chan struct{}), lease: *row.CompletionLeaseUntil}
	go func() {
		defer close(k.ended)
		beat := s.completionBeat
		if beat <= 0 {
			beat = completionLease / 3
		}
		tick := time.NewTicker(beat)
		defer tick.Stop()
		for {
			select {
			case <-k.done:
				return
			case <-tick.C:
			}
			k.mu.Lock()
			held := k.lease
			k.mu.Unlock()
			next, err := s.q.FileExtendCompletion(context.WithoutCancel(ctx), s.db, db.FileExtendCompletionParams{
				ID: row.ID, Lease: held, CompletionLease: completionLease, Now: s.now(),
			})
			switch {
			case isNoRows(err):
				return
			case err != nil:
				s.log.WarnContext(ctx, "extend completion lease failed; retried at the next beat", "file_id", row.ID, "error", err.Error())
			default:
				k.mu.Lock()
				k.lease = *next
				k.mu.Unlock()
			}
		}
	}()
	return k
}

// stop ends the heartbeat (waiting for an extension in flight) and returns
// the lease in force, which the statement that ends the completion names.
func (k *leaseKeeper) stop() time.Time {
	close(k.done)
	<-k.ended
	return k.lease
}
