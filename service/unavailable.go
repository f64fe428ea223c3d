package service

import (
	"errors"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Dependency names a system the service depends on for an answer.
type Dependency string

// The dependencies whose outage a caller is told about.
const (
	// DependencyDatabase: PostgreSQL (no connection, a timeout, a server
	// shutting down or refusing connections, a schema it cannot use).
	DependencyDatabase Dependency = "database"
	// DependencyStorage: the object store (local disk or S3) failed for a
	// reason other than the object's own state.
	DependencyStorage Dependency = "storage"
	// DependencyScanner: the malware scanner gave no verdict.
	DependencyScanner Dependency = "scanner"
)

// ErrUnavailable matches (errors.Is) every error of an operation that
// could not be answered because a dependency did not answer. It is never
// "not found": the file may well exist. The same call can succeed later.
var ErrUnavailable = errors.New("uploadedfile: a dependency did not answer")

// UnavailableError is the failure of an operation whose dependency did not
// answer. Its message is its stable code, core.<dependency>.unavailable;
// errors.Is matches ErrUnavailable and, for a write, the spec code of the
// operation that failed (ErrUploadFailed, ErrDeleteFailed, ...). The cause
// is logged where it happened and kept for errors.As (a host may inspect a
// *pgconn.PgError); it never reaches an HTTP answer.
type UnavailableError struct {
	Dependency Dependency
	op         *Error
	rule       string
	cause      error
}

// Code is the stable code of the outage: core.database.unavailable,
// core.storage.unavailable or core.scanner.unavailable.
func (e *UnavailableError) Code() string { return "core." + string(e.Dependency) + ".unavailable" }

func (e *UnavailableError) Error() string { return e.Code() }

// Is matches ErrUnavailable and the failed operation's spec code.
func (e *UnavailableError) Is(target error) bool {
	return target == ErrUnavailable || e.op != nil && e.op.Is(target)
}

// Unwrap is the dependency's own error.
func (e *UnavailableError) Unwrap() error { return e.cause }

// unavailable is an outage of dep for an operation with the spec code op
// (nil for a read), caused by cause.
func unavailable(dep Dependency, op *Error, cause error) *UnavailableError {
	return &UnavailableError{Dependency: dep, op: op, cause: cause}
}

// Unavailable returns the dependency that did not answer when err is an
// outage (errors.Is(err, ErrUnavailable)).
func Unavailable(err error) (Dependency, bool) {
	var e *UnavailableError
	if errors.As(err, &e) {
		return e.Dependency, true
	}
	return "", false
}

// classifyFailure is the public form of an operation's failure (the code
// of the operation, op) from its cause: an outage the database wrapper or
// a storage driver already named keeps its dependency; any other cause is
// the operation's own code (a statement the schema refused, a bug).
func classifyFailure(op *Error, cause error) error {
	var ue *UnavailableError
	switch {
	case errors.As(cause, &ue):
		if op == ErrNotFound { // a read: there is no spec code to keep
			op = nil
		}
		return &UnavailableError{Dependency: ue.Dependency, op: op, rule: ue.rule, cause: ue.cause}
	case errors.Is(cause, storage.ErrUnavailable):
		if op == ErrNotFound {
			op = nil
		}
		return unavailable(DependencyStorage, op, cause)
	}
	return op
}
