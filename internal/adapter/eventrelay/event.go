package eventrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/uploadedfile/uploadedfile/db"
)

// Types are the lifecycle event names; the CloudEvents type is
// TypePrefix + name.
var Types = []string{
	"file.ready", "file.deleted", "file.purged", "file.expired",
	"file.attached", "file.detached", "upload.failed", "upload.abandoned",
	"file.quarantined", "file.unquarantined",
}

// TypePrefix prefixes an event name to make its CloudEvents type.
const TypePrefix = "io.uploadedfile."

// ContentType is the media type of a structured-mode CloudEvent.
const ContentType = "application/cloudevents+json"

// Event is one outbox event ready to send: its identity, where it sorts,
// and its structured-mode CloudEvents JSON.
type Event struct {
	// Seq and Tx place the event in the outbox.
	Seq, Tx int64
	// ID is the CloudEvents id (a UUIDv7), the same on every delivery.
	ID string
	// Type is the event name (file.ready, ...).
	Type string
	// Tenant is the file's tenant.
	Tenant string
	// FileID is the CloudEvents subject.
	FileID string
	// Time is when the transition happened (database clock).
	Time time.Time
	// JSON is the whole event in CloudEvents structured mode.
	JSON []byte
}

// NewEvent builds the CloudEvent of an outbox row with the CloudEvents SDK:
// type io.uploadedfile.<name>, the file id as subject, the tenant (and an
// upload.failed event's rule) as extension attributes, the HTTP-safe file
// representation as data.
func NewEvent(source string, row db.UploadedFileEvent) (Event, error) {
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ce.SetID(row.ID.String())
	ce.SetSource(source)
	ce.SetType(TypePrefix + row.Type)
	ce.SetSubject(row.FileID.String())
	ce.SetTime(row.OccurredAt.UTC())
	ce.SetExtension("tenant", row.TenantCode)
	if row.Rule != nil {
		ce.SetExtension("rule", *row.Rule)
	}
	// json.RawMessage, not []byte: the SDK would send bytes as data_base64.
	if err := ce.SetData("application/json", json.RawMessage(row.Data)); err != nil {
		return Event{}, fmt.Errorf("eventrelay: event %s data: %w", row.ID, err)
	}
	if err := ce.Validate(); err != nil {
		return Event{}, fmt.Errorf("eventrelay: event %s: %w", row.ID, err)
	}
	b, err := json.Marshal(ce)
	if err != nil {
		return Event{}, fmt.Errorf("eventrelay: encode event %s: %w", row.ID, err)
	}
	return Event{
		Seq: row.Seq, Tx: row.Tx, ID: row.ID.String(), Type: row.Type, Tenant: row.TenantCode,
		FileID: row.FileID.String(), Time: row.OccurredAt, JSON: b,
	}, nil
}

// StatusError is a sink's refusal: the destination answered, with this
// status.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("status %d", e.Code) }

// Reason is what the relay records and logs of a delivery failure: a
// status, a timeout or an error class -- never the destination's URL
// (which may carry credentials) or anything a secret went into.
func Reason(err error) string {
	var se *StatusError
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return se.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &ue):
		var oe *net.OpError
		if errors.As(ue.Err, &oe) {
			return oe.Op + ": " + oe.Err.Error()
		}
		return "request failed: " + ue.Err.Error()
	default:
		s := err.Error()
		if len(s) > 200 {
			s = s[:200]
		}
		return s
	}
}
