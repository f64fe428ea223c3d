package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// New files' ids are UUIDv7s in the order the files were made, so their
// keys and urns sort together (the unique indexes take recent rows on a
// few pages): a buffer upload, then a direct upload, then another buffer
// upload, each id after the one before and stamped with the time it was
// made.
func TestNewFilesHaveTimeOrderedIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	var ids []uuid.UUID
	for i := range 3 {
		before := time.Now().UnixMilli()
		var id uuid.UUID
		if i == 1 {
			init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, realDOCX(t)), nil)
			require.NoError(t, err)
			id = init.ID
		} else {
			r, err := b.svc.Upload(alice, strings.NewReader("a,b\n1,2\n"), "t.csv", nil)
			require.NoError(t, err)
			id = r.ID
			require.Contains(t, r.Key, id.String(), "the key is made of the id")
		}
		after := time.Now().UnixMilli()
		require.Equal(t, uuid.Version(7), id.Version(), "file %d", i)
		sec, nsec := id.Time().UnixTime()
		stamp := time.Unix(sec, nsec).UnixMilli()
		require.True(t, before <= stamp && stamp <= after, "file %d stamped %d, made in [%d, %d]", i, stamp, before, after)
		if len(ids) > 0 {
			require.Negative(t, strings.Compare(ids[len(ids)-1].String(), id.String()), "file %d sorts after the file before it", i)
		}
		ids = append(ids, id)
	}
}
