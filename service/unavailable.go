package service

import (
	"errors"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/outage"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Dependency names a system the service depends on for an answer.
type Dependency = outage.Dependency

// The dependencies whose outage a caller is told about.
const (
	// DependencyDatabase: PostgreSQL (no connection, a timeout, a server
	// shutting down or refusing connections, a schema it cannot use).
	DependencyDatabase = outage.Database
	// DependencyStorage: the object store (local disk or S3) failed for a
	// reason other than the object's own state.
	DependencyStorage = outage.Storage
	// DependencyScanner: the malware scanner gave no verdict.
	DependencyScanner = outage.Scanner
)

// ErrUnavailable matches (errors.Is) every error of an operation that
// could not be answered because a dependency did not answer. It is never
// "not found": the file may well exist. The same call can succeed later.
var ErrUnavailable = outage.ErrUnavailable

// UnavailableError is the failure of an operation whose dependency did not
// answer. Its message is its stable code, core.<dependency>.unavailable
// (Code); errors.Is matches ErrUnavailable and, for a write, the documented code
// of the operation that failed (ErrUploadFailed, ErrDeleteFailed, ...). The
// cause is logged where it happened and kept for errors.As (a host may
// inspect a *pgconn.PgError); it never reaches an HTTP answer. The
// persistence package (db) makes the database's, classifying every
// statement's error once.
type UnavailableError = outage.Error

// unavailable is an outage of dep for an operation with the documented code op
// (nil for a read), caused by cause.
func unavailable(dep Dependency, op *Error, rule string, cause error) *UnavailableError {
	return outage.New(dep, opCode(op), rule, cause)
}

// opCode is op as an error, nil for a read (no typed nil in an interface).
func opCode(op *Error) error {
	if op == nil || op == ErrNotFound { // a read: there is no operation code to keep
		return nil
	}
	return op
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
// of the operation, op) from its cause: an outage the persistence package
// or a storage driver already named keeps its dependency; any other cause
// is the operation's own code (a statement the schema refused, a bug). A
// transaction aborted by a concurrent one is ErrConflict, whatever the
// operation.
func classifyFailure(op *Error, cause error) error {
	var ue *UnavailableError
	switch {
	case errors.Is(cause, db.ErrConflict), errors.Is(cause, ErrConflict):
		return ErrConflict
	case errors.As(cause, &ue):
		return ue.For(opCode(op))
	case errors.Is(cause, storage.ErrUnavailable):
		return unavailable(DependencyStorage, op, storageRule(cause), cause)
	}
	return op
}

// The rules of a store that failed for its own state, on the problem of the
// request that met it (code core.storage.unavailable).
const (
	RuleStorageNoSpace  = "storage.no-space"
	RuleStorageReadOnly = "storage.read-only"
	RuleStorageIOError  = "storage.io-error"
)

// storageRule names the store's own failure in cause, or "" for a store
// that did not answer.
func storageRule(cause error) string {
	switch storage.FaultKind(cause) {
	case "no_space":
		return RuleStorageNoSpace
	case "read_only":
		return RuleStorageReadOnly
	case "io_error":
		return RuleStorageIOError
	}
	return ""
}
