package service

import "github.com/google/uuid"

// newTimeOrderedID is the id of a new file or variant: a UUIDv7 (RFC
// 9562), its first 48 bits the Unix milliseconds of its making and the rest
// random. New rows' ids, keys and urns then sort next to each other, so the
// unique indexes over them take a new row, and every later update of a
// recent row, on a few pages at their right end rather than one page
// anywhere in a large index (docs/decisions.md, "Time-ordered ids"). The
// id is not a secret (every read is scoped); it does tell when the file
// was made, as its createdAt does. NewV7 fails only when crypto/rand
// does, which ends the program instead of returning an error; Must is
// uuid.New's own answer to that.
func newTimeOrderedID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
