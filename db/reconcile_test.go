package db_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// TestOrphanClaimRechecksOwnership: a repair can claim a key only while no
// row owns it -- as a final key until its deletion settles, as a staging
// key while its upload is live or its staging sweep is due -- and only
// once; an elapsed claim is claimed again, then settled or released.
func TestOrphanClaimRechecksOwnership(t *testing.T) {
	t.Parallel()
	b := setup(t)
	claim := func(key string) (db.UploadedFileOrphanClaim, error) {
		return b.q.OrphanClaim(b.ctx, b.pool, db.OrphanClaimParams{Key: key, Lease: deletionLease, Now: at(0)})
	}
	visible := b.ready(t, fileOpts{})
	pending := b.pending(t, fileOpts{})
	c := b.completing(t, fileOpts{})
	retained, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: c.ID, Lease: *c.CompletionLeaseUntil, RetainStaging: true, ClockSkew: clockSkew, Now: at(0)})
	require.NoError(t, err)
	settled := b.ready(t, fileOpts{})
	cl, err := b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: settled.ID, TenantCode: settled.TenantCode, DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	_, err = b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: settled.ID, Claim: *cl.DeletionPendingAt, Now: at(time.Second)})
	require.NoError(t, err)

	for name, key := range map[string]string{
		"a visible file's key":               visible.Key,
		"a pending upload's staging key":     *pending.PendingKey,
		"a pending upload's final key":       pending.Key,
		"a retained staging key (sweep due)": *retained.PendingKey,
	} {
		_, err := claim(key)
		requireNoRows(t, err, name)
	}
	got, err := claim(settled.Key)
	require.NoError(t, err, "a settled deletion's key is no row's")
	require.Equal(t, t0.Add(deletionLease), got.ClaimedUntil.UTC())
	_, err = claim(settled.Key)
	requireNoRows(t, err, "claimed once")
	unknown, err := claim("core/never-a-row.pdf")
	require.NoError(t, err)

	rows, err := b.q.OrphanClaimElapsed(b.ctx, b.pool, db.OrphanClaimElapsedParams{Max: 10, Lease: deletionLease, Now: at(deletionLease - time.Second)})
	require.NoError(t, err)
	require.Empty(t, rows, "live leases are not taken over")
	rows, err = b.q.OrphanClaimElapsed(b.ctx, b.pool, db.OrphanClaimElapsedParams{Max: 10, Lease: deletionLease, Now: at(deletionLease)})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	_, err = b.q.OrphanSettle(b.ctx, b.pool, db.OrphanSettleParams{Key: unknown.Key, Claim: unknown.ClaimedUntil})
	requireNoRows(t, err, "a taken-over claim does not settle")
	for _, r := range rows {
		if r.Key == unknown.Key {
			released, err := b.q.OrphanRelease(b.ctx, b.pool, db.OrphanReleaseParams{Key: r.Key, Claim: r.ClaimedUntil, Backoff: retryBackoff, Now: at(deletionLease)})
			require.NoError(t, err)
			require.Equal(t, t0.Add(deletionLease+retryBackoff), released.ClaimedUntil.UTC())
			continue
		}
		_, err := b.q.OrphanSettle(b.ctx, b.pool, db.OrphanSettleParams{Key: r.Key, Claim: r.ClaimedUntil})
		require.NoError(t, err)
	}
	claimed, err := b.q.OrphanIsClaimed(b.ctx, b.pool, settled.Key)
	require.NoError(t, err)
	require.False(t, claimed, "settled")
	claimed, err = b.q.OrphanIsClaimed(b.ctx, b.pool, unknown.Key)
	require.NoError(t, err)
	require.True(t, claimed, "released, still claimed")
}

// TestSigningKeyEnsure: the first caller's key is every caller's.
func TestSigningKeyEnsure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.q.SigningKeyEnsure(b.ctx, b.pool, db.SigningKeyEnsureParams{Purpose: "upload-target", Secret: bytes.Repeat([]byte{1}, 32)})
	require.NoError(t, err)
	second, err := b.q.SigningKeyEnsure(b.ctx, b.pool, db.SigningKeyEnsureParams{Purpose: "upload-target", Secret: bytes.Repeat([]byte{2}, 32)})
	require.NoError(t, err)
	require.Equal(t, first, second, "a later replica gets the key the first one made")
	require.Equal(t, bytes.Repeat([]byte{1}, 32), second)
	_, err = b.q.SigningKeyEnsure(b.ctx, b.pool, db.SigningKeyEnsureParams{Purpose: "short", Secret: []byte("x")})
	require.Error(t, err, "a key shorter than 32 bytes is refused")
}
