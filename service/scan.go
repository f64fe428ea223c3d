package service

import (
	"context"
	"io"

	"github.com/uploadedfile/uploadedfile/db"
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
	// RuleContentUnscannable: the scanner could not look at all of the
	// content (an archive nested or filled past its limits, encrypted
	// content): refused like malware (ErrInvalidUpload, not retryable),
	// never clean.
	RuleContentUnscannable = "content.unscannable"
	// RuleScanUnavailable: the scanner was down or too slow (an
	// *UnavailableError of DependencyScanner that matches ErrUploadFailed;
	// retryable; fail closed).
	RuleScanUnavailable = "scan.unavailable"
)

// Scanner scans bytes for malware: its verdict, or an error when it has
// none (never a clean one). The clamd client (internal/clamd) is one;
// WithScanner installs it.
type Scanner func(ctx context.Context, r io.Reader) (ScanVerdict, error)

// ScanVerdict is a scanner's answer for one file. Clean is the zero value.
type ScanVerdict struct {
	// Infected: a signature matched.
	Infected bool
	// Unscannable: the scanner could not look at all of it (a container
	// past its limits, encrypted content) -- never clean.
	Unscannable bool
	// Signature names the match or the alert (for the server log only).
	Signature string
}

// WithScanner sets the scanner the gate (Config.ScanMode "gate") uses.
func WithScanner(sc Scanner) Option { return func(s *Service) { s.scanner = sc } }

// scan runs the gate on r: nil when the gate is off or the bytes are
// clean; invalidUpload(RuleContentInfected) when the scanner found
// something, invalidUpload(RuleContentUnscannable) when it could not look
// at all of it; the scanner's outage (DependencyScanner, matching
// ErrUploadFailed, rule RuleScanUnavailable, retryable) when it gave no
// verdict.
func (s *Service) scan(ctx context.Context, r io.Reader, row db.UploadedFile) error {
	if s.cfg.ScanMode != ScanGate {
		return nil
	}
	v, err := s.scanner(ctx, r)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "malware scan failed; upload not accepted", "file_id", row.ID, "error", err.Error())
		return unavailable(DependencyScanner, ErrUploadFailed, RuleScanUnavailable, err)
	case v.Infected:
		s.log.WarnContext(ctx, "malware found; upload refused", "file_id", row.ID, "tenant", row.TenantCode, "signature", v.Signature)
		return invalidUpload(RuleContentInfected)
	case v.Unscannable:
		s.log.WarnContext(ctx, "content the scanner cannot judge; upload refused", "file_id", row.ID, "tenant", row.TenantCode, "alert", v.Signature)
		return invalidUpload(RuleContentUnscannable)
	}
	return nil
}

// scanStaging runs the gate on a claimed direct upload's staging object
// before it is promoted. Infected or unscannable: a *refusal (the upload
// fails durably, its objects deleted through its claim, upload.failed with
// the rule). No verdict: a *scanUnavailable (the claim is given back and
// the upload stays pending, so the client can complete it again).
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
	case Rule(err) == RuleContentInfected, Rule(err) == RuleContentUnscannable:
		return &refusal{rule: Rule(err), reason: "scan verdict", answer: err}
	default:
		return &scanUnavailable{err: err}
	}
}

// UnsafeSystemUnquarantine brings a quarantined file back (a false
// positive): ready and visible again, with a file.unquarantined event. A
// file that is not quarantined is ErrNotFound. Trusted operators only.
func (s *Service) UnsafeSystemUnquarantine(ctx context.Context, id string) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	_, err = s.q.FileUnquarantine(ctx, s.db, db.FileUnquarantineParams{ID: uid, Now: s.now()})
	if isNoRows(err) {
		return ErrNotFound
	}
	if err != nil {
		return s.internalError(ctx, ErrCleanupFailed, "unquarantine file", err, "file_id", uid)
	}
	return nil
}
