package service

import (
	"context"
	"time"

	"github.com/uploadedfile/uploadedfile/db"
)

// InsertHidden runs FileInsertHidden for one upload, as the service does
// for an upload alone.
func InsertHidden(ctx context.Context, conn db.DBTX, p db.FileInsertHiddenParams) (db.FileInsertHiddenRow, error) {
	return db.New().InsertHiddenAlone(ctx, conn, p)
}

// ActivateUpload runs FileActivateUpload for one upload, as the service
// does for an upload alone.
func ActivateUpload(ctx context.Context, conn db.DBTX, p db.FileActivateUploadParams) (db.FileActivateUploadRow, error) {
	return db.New().ActivateUploadAlone(ctx, conn, p)
}

// QueuedInserts is how many buffer uploads wait for a batch of their
// FileInsertHidden.
func (s *Service) QueuedInserts() int { n, _ := s.uploads.Queued(); return n }

// QueuedActivations is how many buffer uploads wait for a batch of their
// FileActivateUpload.
func (s *Service) QueuedActivations() int { _, n := s.uploads.Queued(); return n }

// SetCompletionBeat sets how often s's running completions extend their
// lease.
func SetCompletionBeat(s *Service, d time.Duration) { s.completionBeat = d }

// SetActivationBeat sets how often s's buffer uploads extend their
// activation lease while they scan and store their bytes.
func SetActivationBeat(s *Service, d time.Duration) { s.activationBeat = d }

// CompletionLease is completionLease.
const CompletionLease = completionLease

// GrantedURLWithoutETag is the url of row's object as it was granted
// before grants carried the object's ETag.
func (s *Service) GrantedURLWithoutETag(ctx context.Context, row db.UploadedFile) (string, error) {
	o := objectRef{key: row.Key, route: s.downloadURL(row.ID), name: row.OriginalName, contentType: row.ContentType}
	return s.grantedURL(ctx, row.ID, "", o, false, s.clock().Add(time.Minute))
}
