// Package outage is the error of an operation that could not be answered
// because a system it depends on did not answer: PostgreSQL, the object
// store, the malware scanner. It is a leaf so that the persistence package
// (db), which classifies database errors, and the service, which names the
// others, make the same error; service re-exports it as UnavailableError,
// ErrUnavailable and Dependency.
package outage

import "errors"

// Dependency names a system the service depends on for an answer.
type Dependency string

// The dependencies whose outage a caller is told about.
const (
	// Database: PostgreSQL (no connection, a timeout, a server shutting down
	// or refusing connections, a schema it cannot use).
	Database Dependency = "database"
	// Storage: the object store (local disk or S3) failed for a reason other
	// than the object's own state.
	Storage Dependency = "storage"
	// Scanner: the malware scanner gave no verdict.
	Scanner Dependency = "scanner"
)

// ErrUnavailable matches (errors.Is) every *Error. It is never "not
// found": the file may well exist. The same call can succeed later.
var ErrUnavailable = errors.New("uploadedfile: a dependency did not answer")

// Error is the failure of an operation whose dependency did not answer. Its
// message is its stable code, core.<dependency>.unavailable; errors.Is
// matches ErrUnavailable and, for a write, the code of the operation that
// failed. The cause is kept for errors.As (a host may inspect a
// *pgconn.PgError); it never reaches an HTTP answer.
type Error struct {
	// Dependency is the system that did not answer.
	Dependency Dependency
	op         error
	rule       string
	cause      error
}

// New is an outage of dep for an operation whose failure code is op (nil
// for a read, which has none), with the rule a refused upload names (or
// ""), caused by cause.
func New(dep Dependency, op error, rule string, cause error) *Error {
	return &Error{Dependency: dep, op: op, rule: rule, cause: cause}
}

// Code is the stable code of the outage: core.database.unavailable,
// core.storage.unavailable or core.scanner.unavailable.
func (e *Error) Code() string { return "core." + string(e.Dependency) + ".unavailable" }

func (e *Error) Error() string { return e.Code() }

// Is matches ErrUnavailable and the failed operation's code.
func (e *Error) Is(target error) bool {
	return target == ErrUnavailable || e.op != nil && errors.Is(e.op, target)
}

// Unwrap is the dependency's own error.
func (e *Error) Unwrap() error { return e.cause }

// Op is the failed operation's code; nil for a read.
func (e *Error) Op() error { return e.op }

// Rule is the rule a refused upload names (the scanner's
// scan.unavailable), or "".
func (e *Error) Rule() string { return e.rule }

// For is the same outage as the failure of the operation op (nil for a
// read); its dependency, rule and cause are kept.
func (e *Error) For(op error) *Error {
	return &Error{Dependency: e.Dependency, op: op, rule: e.rule, cause: e.cause}
}
