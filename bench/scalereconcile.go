package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/service"
)

// scaleReconcileObjects is how many objects one measured reconcile walks:
// the oldest visible files of the big tenant scaleReconcilePrefix holds,
// each with its object of the row's size. The walk stops after them, so
// the work per call is the same at every table size: what changes is the
// table the references are read from.
const (
	scaleReconcileObjects = 2000
	scaleReconcilePrefix  = "core/t-tenant-0/"
)

// reconcileOp is reconcile's cost per object walked: the store's listing
// merged with the rows' references, each visible file's object compared
// with its row.
var reconcileOp = scaleOp{
	name: fmt.Sprintf("reconcile of a tenant's prefix, %d objects", scaleReconcileObjects), calls: 5, objects: scaleReconcileObjects,
	call: func(f *scaleFixture, _ int) error { return reconcileWalk(f.t) },
}

// writeReconcileObjects writes, through the local driver over t's root,
// the objects of the first visible files under scaleReconcilePrefix in key
// order, one more than a walk takes (the walk stops when it meets it), each
// of its row's size: the files a deployment holds, as reconcile lists them.
func writeReconcileObjects(ctx context.Context, t *scaleTarget) error {
	store, err := local.New(local.Config{Root: t.root})
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	written, start := 0, scaleReconcilePrefix
	ended := func() error {
		return fmt.Errorf("%d rows: %d objects written, the references under %s ended", t.total, written, scaleReconcilePrefix)
	}
	for written <= scaleReconcileObjects {
		refs, err := db.New().ReconcileReferencesFrom(ctx, t.pool, db.ReconcileReferencesFromParams{StartKey: start, Max: 1000})
		if err != nil {
			return err
		}
		if len(refs) < 2 {
			return ended()
		}
		for _, r := range refs {
			switch {
			case written > scaleReconcileObjects:
				return nil
			case !strings.HasPrefix(r.Ref, scaleReconcilePrefix):
				return ended()
			case !r.Visible || r.Ref == start:
				continue
			}
			body := io.LimitReader(zeros{}, r.SizeBytes)
			if _, err := store.Put(ctx, r.Ref, body, storage.PutOptions{Size: r.SizeBytes, ContentType: "application/pdf"}); err != nil {
				return err
			}
			written++
		}
		start = refs[len(refs)-1].Ref
	}
	return nil
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// errWalked stops a reconcile once it has walked its objects.
var errWalked = errors.New("walked")

// reconcileWalk runs one reconcile of scaleReconcilePrefix, stopped after
// scaleReconcileObjects objects; a walk that finds anything, or that does
// not stop where it should, is an error (it measured other work).
func reconcileWalk(t *scaleTarget) error {
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	counts, err := t.svc.UnsafeSystemReconcile(ctx, service.ReconcileOptions{
		Prefix: scaleReconcilePrefix,
		Progress: func(objects int64, _ string) {
			if objects == scaleReconcileObjects {
				stop(errWalked)
			}
		},
	}, func(f service.Finding) error { return fmt.Errorf("a finding: %s %s (%s)", f.Kind, f.Key, f.Detail) })
	switch {
	case err != nil:
		return err
	case !counts.Interrupted || counts.Objects != scaleReconcileObjects:
		return fmt.Errorf("the walk stopped after %d objects, interrupted %t", counts.Objects, counts.Interrupted)
	}
	return nil
}
