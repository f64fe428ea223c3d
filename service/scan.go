package service

import (
	"context"
	"errors"
	"io"

	"github.com/uploadedfile/uploadedfile/gen/db"
)

// The scan modes (Config.ScanMode).
const (
	// ScanOff: no malware scan (the default).
	ScanOff = "off"
	// ScanGate: no file becomes visible before a clean scan.
	ScanGate = "gate"
)

// The rules of a scan.
const (
	// RuleContentInfected: the scanner found malware (ErrInvalidUpload;
	// the signature is only in the server log).
	RuleContentInfected = "content.infected"
	// RuleScanUnavailable: the scanner was down or too slow
	// (ErrUploadFailed, retryable; fail closed).
	RuleScanUnavailable = "scan.unavailable"
)

// Scanner scans bytes for malware: infected with the matching signature's
// name, or an error when it has no verdict (never a clean one). The clamd
// client (internal/clamd) is one; WithScanner installs it.
type Scanner func(ctx context.Context, r io.Reader) (infected bool, signature string, err error)

// WithScanner sets the scanner the gate (Config.ScanMode "gate") uses.
func WithScanner(sc Scanner) Option { return func(s *Service) { s.scanner = sc } }

// scan runs the gate on r: nil when the gate is off or the bytes are
// clean; invalidUpload(RuleContentInfected) when the scanner found
// something; ErrUploadFailed (RuleScanUnavailable, retryable) when it
// gave no verdict.
func (s *Service) scan(ctx context.Context, r io.Reader, row db.UploadedFile) error {
	if s.cfg.ScanMode != ScanGate {
		return nil
	}
	infected, sig, err := s.scanner(ctx, r)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "malware scan failed; upload not accepted", "file_id", row.ID, "error", err.Error())
		return &ruleError{code: ErrUploadFailed, rule: RuleScanUnavailable, retryable: true}
	case infected:
		s.log.WarnContext(ctx, "malware found; upload refused", "file_id", row.ID, "tenant", row.TenantCode, "signature", sig)
		return invalidUpload(RuleContentInfected)
	}
	return nil
}

// scanStaging runs the gate on a claimed direct upload's staging object
// before it is promoted. Infected: the upload fails durably (its objects
// deleted through its claim, upload.failed with the rule). No verdict: the
// claim is given back and the upload stays pending, so the client can
// complete it again.
func (s *Service) scanStaging(ctx context.Context, row db.UploadedFile) error {
	if s.cfg.ScanMode != ScanGate {
		return nil
	}
	body, err := s.store.Open(ctx, *row.PendingKey, nil)
	if err != nil {
		return s.internalError(ctx, ErrUploadFailed, "open staging object to scan", err, "file_id", row.ID)
	}
	defer body.Close()
	err = s.scan(ctx, body, row)
	switch {
	case err == nil:
		return nil
	case Rule(err) == RuleContentInfected:
		if ferr := s.failUpload(ctx, row, RuleContentInfected, "malware"); !isVerificationFailure(ferr) {
			return ferr
		}
		return err
	default:
		if _, rerr := s.q.FileReleaseCompletion(context.WithoutCancel(ctx), s.db, db.FileReleaseCompletionParams{
			ID: row.ID, Lease: *row.CompletionLeaseUntil, Now: s.now(),
		}); rerr != nil && !isNoRows(rerr) {
			s.log.WarnContext(ctx, "release completion failed; its lease will run out", "file_id", row.ID, "error", rerr.Error())
		}
		return err
	}
}

// isVerificationFailure: failUpload failed the upload (rather than losing
// its lease or the database).
func isVerificationFailure(err error) bool {
	var e *ruleError
	return errors.As(err, &e) && e.code == ErrUploadVerificationFailed
}
