package service_test

import (
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// TestStorageMetrics: a service that opens its own store (an embedding
// host's) counts storage requests and the bytes through the service, and
// local downloads stay seekable behind the counter.
func TestStorageMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	reg := prometheus.NewRegistry()
	cfg := b.cfg
	cfg.LocalRoot = t.TempDir()
	svc, err := service.New(t.Context(), cfg, b.db, service.WithMetrics(reg))
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	r, err := svc.Upload(alice, strings.NewReader(pdf), "report.pdf", nil)
	require.NoError(t, err)
	d, err := svc.Download(alice, r.ID.String())
	require.NoError(t, err)
	_, seekable := d.Body.(io.Seeker)
	require.True(t, seekable)
	d.Body.Close()
	n, err := testutil.GatherAndCount(reg, "uploadedfile_storage_requests_total", "uploadedfile_storage_bytes_total")
	require.NoError(t, err)
	require.Positive(t, n)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	written := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "uploadedfile_storage_bytes_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "written" {
					written = m.GetCounter().GetValue()
				}
			}
		}
	}
	require.EqualValues(t, len(pdf), written)
}
