package eventrelay_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/gen/client"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/jetstream"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/webhook"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// natsURL is the machine's NATS server with JetStream.
const natsURL = "nats://127.0.0.1:4222"

var tenantCtx = service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme.eu", UserID: "alice"})

// world is a database with a service writing real events into it.
type world struct {
	t    *testing.T
	pool *pgxpool.Pool
	svc  *service.Service
}

func newWorld(t *testing.T) *world {
	t.Helper()
	pool := pgtest.New(t)
	svc, err := service.New(context.Background(), service.Config{Driver: service.DriverLocal, LocalRoot: t.TempDir()}, pool)
	require.NoError(t, err)
	return &world{t: t, pool: pool, svc: svc}
}

// files makes n files go through ready, attached and deleted+purged, and
// returns the outbox ids in outbox order.
func (w *world) files(n int) []string {
	w.t.Helper()
	for i := range n {
		r, err := w.svc.Upload(tenantCtx, strings.NewReader(fmt.Sprintf("line %d\n", i)), "notes.txt", nil)
		require.NoError(w.t, err)
		require.NoError(w.t, w.svc.MarkUsed(tenantCtx, []string{r.ID.String()}, &service.Meta{Entity: "invoice", EntityID: fmt.Sprint(i)}, nil))
		require.NoError(w.t, w.svc.DeleteByID(tenantCtx, r.ID.String()))
	}
	return w.outbox()
}

func (w *world) outbox() []string {
	w.t.Helper()
	rows, err := w.pool.Query(context.Background(), "SELECT id::text FROM uploaded_file_event ORDER BY tx, seq")
	require.NoError(w.t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(w.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(w.t, rows.Err())
	return ids
}

// drain runs passes until one delivers nothing and nothing is backing off.
func drain(t *testing.T, r *eventrelay.Relay) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := r.Pass(context.Background())
		require.NoError(t, err)
		st, err := r.Status(context.Background())
		require.NoError(t, err)
		idle := n == 0
		for _, s := range st {
			idle = idle && s.Depth == 0
		}
		if idle {
			return
		}
		if n == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Fatal("the relay did not drain the outbox in 30s")
}

func newSecret(t *testing.T) string {
	t.Helper()
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
}

// receiver is a webhook endpoint that verifies every request with the
// Standard Webhooks library and records the events it accepted.
type receiver struct {
	t      *testing.T
	wh     *standardwebhooks.Webhook
	mu     sync.Mutex
	got    []cloudevents.Event
	bodies map[string][]byte
	// answer decides the status for an event id (nil: 204).
	answer func(id string, attempt int) int
	tries  map[string]int
	srv    *httptest.Server
}

func newReceiver(t *testing.T, secret string) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	rc := &receiver{t: t, wh: wh, bodies: map[string][]byte{}, tries: map[string]int{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if err := rc.wh.Verify(body, r.Header); err != nil {
		rc.t.Errorf("signature refused by the Standard Webhooks library: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/cloudevents+json" {
		rc.t.Errorf("content type %q", ct)
	}
	var e cloudevents.Event
	if err := json.Unmarshal(body, &e); err != nil {
		rc.t.Errorf("not a structured CloudEvent: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if e.ID() != r.Header.Get("webhook-id") {
		rc.t.Errorf("webhook-id %q is not the event id %q", r.Header.Get("webhook-id"), e.ID())
	}
	rc.mu.Lock()
	rc.tries[e.ID()]++
	attempt := rc.tries[e.ID()]
	answer := rc.answer
	rc.mu.Unlock()
	status := http.StatusNoContent
	if answer != nil {
		status = answer(e.ID(), attempt)
	}
	if status < 300 {
		rc.mu.Lock()
		if prev, dup := rc.bodies[e.ID()]; dup && string(prev) != string(body) {
			rc.t.Errorf("event %s delivered twice with different bodies", e.ID())
		}
		rc.bodies[e.ID()] = body
		rc.got = append(rc.got, e)
		rc.mu.Unlock()
	}
	w.WriteHeader(status)
}

func (rc *receiver) ids() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]string, len(rc.got))
	for i, e := range rc.got {
		out[i] = e.ID()
	}
	return out
}

func newRelay(t *testing.T, pool *pgxpool.Pool, sinks ...eventrelay.SinkConfig) *eventrelay.Relay {
	t.Helper()
	r, err := eventrelay.New(pool, eventrelay.Config{Sinks: sinks, Batch: 7})
	require.NoError(t, err)
	return r
}

func hook(t *testing.T, name, url, secret string, mods ...func(*webhook.Config)) eventrelay.SinkConfig {
	t.Helper()
	c := webhook.Config{URL: url, Secret: secret, Timeout: 2 * time.Second}
	for _, m := range mods {
		m(&c)
	}
	s, err := webhook.New(c)
	require.NoError(t, err)
	return eventrelay.SinkConfig{Name: name, Sink: s, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
}

// TestWebhookDeliversEveryEventInOrder: every outbox event arrives once, in
// outbox order, signed (checked by the Standard Webhooks library), as a
// CloudEvent of type io.uploadedfile.<name> with the file as subject and the
// tenant as an extension attribute.
func TestWebhookDeliversEveryEventInOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	want := w.files(5)
	require.Len(t, want, 5*4, "ready, attached, deleted, purged per file")
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	r := newRelay(t, w.pool, hook(t, "hook", rc.srv.URL, secret))
	drain(t, r)
	require.Equal(t, want, rc.ids())

	first := rc.got[0]
	require.Equal(t, "1.0", first.SpecVersion())
	require.Equal(t, "io.uploadedfile.file.ready", first.Type())
	require.Equal(t, "/uploadedfile", first.Source())
	require.Equal(t, "acme.eu", first.Extensions()["tenant"])
	var data map[string]any
	require.NoError(t, first.DataAs(&data))
	require.Equal(t, first.Subject(), data["id"])
	require.Equal(t, "notes.txt", data["originalName"])
	require.NotContains(t, data, "key")
	require.NotContains(t, data, "cdn")

	// Every body is a FileEvent of the contract, and decodes into the
	// generated client's type.
	spec, err := api.GetSpec()
	require.NoError(t, err)
	schema := spec.Components.Schemas["FileEvent"].Value
	for _, body := range rc.bodies {
		var doc any
		require.NoError(t, json.Unmarshal(body, &doc))
		require.NoError(t, schema.VisitJSON(doc), "the contract's FileEvent: %s", body)
		var typed client.FileEvent
		require.NoError(t, json.Unmarshal(body, &typed))
		require.Equal(t, typed.Subject.String(), typed.Data.Id.String())
	}

	// Nothing new: a pass delivers nothing again.
	n, err := r.Pass(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, rc.ids(), len(want))
}

// TestWebhookTypeFilter: a sink with types gets only those, and passes the
// others without holding anything back.
func TestWebhookTypeFilter(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.files(3)
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	sc := hook(t, "ready-only", rc.srv.URL, secret)
	sc.Types = []string{"file.ready", "file.purged"}
	r := newRelay(t, w.pool, sc)
	drain(t, r)
	require.Len(t, rc.got, 6)
	for _, e := range rc.got {
		require.Contains(t, []string{"io.uploadedfile.file.ready", "io.uploadedfile.file.purged"}, e.Type())
	}
}

// TestWebhookFailureBackoffParkAndReplay: a receiver that fails one event
// makes the sink back off and retry it; after MaxAttempts the event is
// parked and the others go through in order; a replay delivers it.
func TestWebhookFailureBackoffParkAndReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	want := w.files(3)
	poison := want[4]
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	refuse := true
	rc.answer = func(id string, attempt int) int {
		if id == poison && refuse {
			return http.StatusServiceUnavailable
		}
		if id == want[1] && attempt == 1 {
			return http.StatusInternalServerError // one transient failure: retried, not parked
		}
		return http.StatusOK
	}
	sc := hook(t, "hook", rc.srv.URL, secret)
	sc.MaxAttempts = 3
	r := newRelay(t, w.pool, sc)
	drain(t, r)
	rc.mu.Lock()
	require.Equal(t, 2, rc.tries[want[1]], "a transient failure is retried")
	require.Equal(t, 3, rc.tries[poison], "MaxAttempts attempts, then parked")
	rc.mu.Unlock()
	got := rc.ids()
	require.NotContains(t, got, poison)
	require.Equal(t, append(append([]string{}, want[:4]...), want[5:]...), got, "the rest in order")

	q := db.New()
	parked, err := q.EventListParked(context.Background(), w.pool, 10)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, poison, parked[0].UploadedFileEvent.ID.String())
	require.Equal(t, "status 503", *parked[0].LastError)

	refuse = false
	n, err := q.EventReplayRequest(context.Background(), w.pool, db.EventReplayRequestParams{ID: parked[0].UploadedFileEvent.ID})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = r.Pass(context.Background())
	require.NoError(t, err)
	require.Equal(t, poison, rc.ids()[len(rc.ids())-1], "the replay delivered it")
	parked, err = q.EventListParked(context.Background(), w.pool, 10)
	require.NoError(t, err)
	require.Empty(t, parked)
}

// TestWebhookTimeoutAndNoRedirects: a receiver slower than the timeout and
// one that redirects are failed attempts, recorded without the URL.
func TestWebhookTimeoutAndNoRedirects(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.files(1)
	secret := newSecret(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	rc := newReceiver(t, secret)
	redirect := httptest.NewServer(http.RedirectHandler(rc.srv.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)

	s1 := hook(t, "slow", slow.URL+"/hook?token=secret-in-url", secret, func(c *webhook.Config) { c.Timeout = 100 * time.Millisecond })
	s2 := hook(t, "moved", redirect.URL, secret)
	s1.MaxAttempts, s2.MaxAttempts = 100, 100
	s1.Backoff, s2.Backoff = time.Hour, time.Hour
	s1.MaxBackoff, s2.MaxBackoff = time.Hour, time.Hour
	r := newRelay(t, w.pool, s1, s2)
	// Passes until both sinks have tried (the outbox is read only below
	// the oldest transaction running on the server, which other tests'
	// transactions can hold back for a moment).
	var st []db.EventSinkStatusRow
	require.Eventually(t, func() bool {
		_, err := r.Pass(context.Background())
		require.NoError(t, err)
		st, err = r.Status(context.Background())
		require.NoError(t, err)
		return len(st) == 2 && st[0].LastError != nil && st[1].LastError != nil
	}, 30*time.Second, 10*time.Millisecond)
	byName := map[string]db.EventSinkStatusRow{st[0].Name: st[0], st[1].Name: st[1]}
	require.Equal(t, "timeout", *byName["slow"].LastError)
	require.Equal(t, "status 307", *byName["moved"].LastError, "redirects are not followed")
	require.Empty(t, rc.ids())
	for _, s := range st {
		require.EqualValues(t, 1, s.Attempts)
		require.EqualValues(t, 4, s.Depth, "nothing delivered, nothing lost")
		require.NotContains(t, *s.LastError, "secret-in-url")
	}
	// Backing off: the next pass does not call them again.
	n, err := r.Pass(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestJetStreamSink: events are published on <prefix>.<tenant>.<type> with
// Nats-Msg-Id = event id into a stream the sink creates; delivering the
// same events again (a relay that lost its acknowledgements) adds nothing
// to the stream.
func TestJetStreamSink(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	want := w.files(4)
	ctx := context.Background()
	stream := fmt.Sprintf("UFTEST_%d", time.Now().UnixNano())
	prefix := strings.ToLower(stream)
	sink, err := jetstream.New(ctx, jetstream.Config{URL: natsURL, SubjectPrefix: prefix, Stream: stream})
	require.NoError(t, err, "the NATS server with JetStream on 127.0.0.1:4222")
	t.Cleanup(sink.Close)
	nc, err := natsgo.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	jsc, err := js.New(nc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = jsc.DeleteStream(context.Background(), stream) })

	r := newRelay(t, w.pool, eventrelay.SinkConfig{Name: "bus", Sink: sink})
	drain(t, r)
	msgs := readStream(t, jsc, stream, len(want))
	require.Len(t, msgs, len(want))
	for i, m := range msgs {
		require.Equal(t, want[i], m.Headers().Get("Nats-Msg-Id"))
		var e cloudevents.Event
		require.NoError(t, json.Unmarshal(m.Data(), &e))
		require.Equal(t, want[i], e.ID())
		require.Equal(t, prefix+".acme%2Eeu."+strings.TrimPrefix(e.Type(), "io.uploadedfile."), m.Subject(), "the tenant escaped to one token")
	}

	// Lost acknowledgements: the cursor goes back, everything is published
	// again, the stream deduplicates by Nats-Msg-Id.
	_, err = w.pool.Exec(ctx, "UPDATE uploaded_file_event_sink SET after_tx = 0, after_seq = 0 WHERE name = 'bus'")
	require.NoError(t, err)
	drain(t, r)
	info, err := jsc.Stream(ctx, stream)
	require.NoError(t, err)
	si, err := info.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, len(want), si.State.Msgs, "redeliveries deduplicated by the stream")
}

// readStream reads up to n messages from the start of a stream.
func readStream(t *testing.T, jsc js.JetStream, stream string, n int) []js.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := jsc.OrderedConsumer(ctx, stream, js.OrderedConsumerConfig{})
	require.NoError(t, err)
	batch, err := cons.Fetch(n, js.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	var out []js.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	return out
}

// TestReplicasShareSinks: two relays running side by side over the same
// outbox deliver everything exactly once when nothing fails -- a sink is
// held by one of them at a time and its cursor moves before it is let go.
func TestReplicasShareSinks(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	want := w.files(10)
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	relays := []*eventrelay.Relay{
		newRelay(t, w.pool, hook(t, "a", rc.srv.URL+"/a", secret), hook(t, "b", rc.srv.URL+"/b", secret)),
		newRelay(t, w.pool, hook(t, "a", rc.srv.URL+"/a", secret), hook(t, "b", rc.srv.URL+"/b", secret)),
	}
	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := r.Pass(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	drain(t, relays[0])
	counts := map[string]int{}
	for _, id := range rc.ids() {
		counts[id]++
	}
	require.Len(t, counts, len(want))
	for id, n := range counts {
		require.Equal(t, 2, n, "event %s: once per sink", id)
	}
}

// TestPruneKeepsWhatASinkStillNeeds: past the retention, delivered events
// are pruned; one a sink has not passed, or has parked, stays.
func TestPruneKeepsWhatASinkStillNeeds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	want := w.files(3)
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	rc.answer = func(id string, _ int) int {
		if id == want[5] {
			return http.StatusBadRequest
		}
		return http.StatusNoContent
	}
	later := time.Now().Add(48 * time.Hour)
	sc := hook(t, "hook", rc.srv.URL, secret)
	sc.MaxAttempts = 1
	r, err := eventrelay.New(w.pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{sc}, Retention: 24 * time.Hour,
		Now: func() *time.Time { return &later }})
	require.NoError(t, err)

	// Nothing delivered yet: nothing pruned, however old.
	n, err := r.Prune(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)

	// Delivered up to the 8th event (the 6th parked), the rest not.
	var tx, seq int64
	require.NoError(t, w.pool.QueryRow(context.Background(), "SELECT tx, seq FROM uploaded_file_event WHERE id = $1", want[7]).Scan(&tx, &seq))
	_, err = w.pool.Exec(context.Background(), "UPDATE uploaded_file_event_sink SET after_tx = $1, after_seq = $2", tx, seq)
	require.NoError(t, err)
	_, err = w.pool.Exec(context.Background(), `INSERT INTO uploaded_file_event_parked (sink, event_seq, attempts, parked_at)
		SELECT 'hook', seq, 1, now() FROM uploaded_file_event WHERE id = $1`, want[5])
	require.NoError(t, err)
	n, err = r.Prune(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 7, n, "the 8 passed, less the parked one")
	left := w.outbox()
	require.Equal(t, append([]string{want[5]}, want[8:]...), left)

	// Within the retention nothing goes.
	now := time.Now()
	r2, err := eventrelay.New(w.pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{sc}, Retention: 24 * time.Hour,
		Now: func() *time.Time { return &now }})
	require.NoError(t, err)
	drain(t, r2)
	n, err = r2.Prune(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestRelayMetrics: deliveries, failures and parking are counted by sink;
// the backlog gauges show what is left and how old its head is.
func TestRelayMetrics(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	want := w.files(2)
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	rc.answer = func(id string, _ int) int {
		if id == want[3] {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	}
	reg := prometheus.NewRegistry()
	sc := hook(t, "hook", rc.srv.URL, secret)
	sc.MaxAttempts = 2
	r, err := eventrelay.New(w.pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{sc}, Registerer: reg})
	require.NoError(t, err)
	// Passes until the first failure (the outbox is read only below the
	// oldest transaction running on the server, which other tests can hold
	// back for a moment), then the gauges as they stand.
	require.Eventually(t, func() bool {
		_, err := r.Pass(context.Background())
		require.NoError(t, err)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.tries[want[3]] > 0
	}, 30*time.Second, 10*time.Millisecond)
	_, err = r.Status(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3.0, value(t, reg, "uploadedfile_events_delivered_total"), "three before the failing one")
	require.Equal(t, 1.0, value(t, reg, "uploadedfile_events_delivery_failures_total"))
	require.Equal(t, float64(len(want)-3), value(t, reg, "uploadedfile_events_outbox_depth"), "the rest is the backlog")
	require.Positive(t, value(t, reg, "uploadedfile_events_oldest_undelivered_seconds"))

	drain(t, r)
	require.Equal(t, float64(len(want)-1), value(t, reg, "uploadedfile_events_delivered_total"))
	require.Equal(t, 1.0, value(t, reg, "uploadedfile_events_parked_total"))
	require.Zero(t, value(t, reg, "uploadedfile_events_outbox_depth"))
	require.Zero(t, value(t, reg, "uploadedfile_events_oldest_undelivered_seconds"))
}

// value is the one series of name (labelled sink="hook") in reg.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.Metric, 1)
			require.Equal(t, "hook", f.Metric[0].Label[0].GetValue())
			return f.Metric[0].GetCounter().GetValue() + f.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestSlowReceiverIsNotATimeout: a receiver that answers every event well
// within the webhook timeout, but too slowly for a whole batch to fit in
// one pass (the lease), gets every event, once, in order -- the pass that
// runs out of time is not recorded as a failure (no "timeout", no attempt,
// no backoff).
func TestSlowReceiverIsNotATimeout(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.files(3) // 12 events
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	rc.answer = func(string, int) int { time.Sleep(150 * time.Millisecond); return http.StatusNoContent }
	s := hook(t, "slow-but-fine", rc.srv.URL, secret)
	r, err := eventrelay.New(w.pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{s}, Batch: 12, Lease: time.Second})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := r.Pass(context.Background())
		require.NoError(t, err)
		st, err := r.Status(context.Background())
		require.NoError(t, err)
		require.Nil(t, st[0].LastError, "a slow receiver is not a failing one")
		require.Zero(t, st[0].Attempts)
		return st[0].Depth == 0
	}, 30*time.Second, 10*time.Millisecond)
	require.Len(t, rc.ids(), 12, "each event once")
}

// TestPruneDoesNotStallBehindParkedEvents: more than a prune batch (1,000)
// of old parked events in front of passed ones: the passed ones are pruned
// all the same (the LIMIT used to come before the parked filter, and a
// pass that pruned fewer than a batch ended the prune).
func TestPruneDoesNotStallBehindParkedEvents(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	// 1,100 old events, the first 1,050 parked; every one passed.
	_, err := w.pool.Exec(ctx, `INSERT INTO uploaded_file_event_sink (name, after_tx, after_seq) VALUES ('hook', 0, 0)`)
	require.NoError(t, err)
	_, err = w.pool.Exec(ctx, `INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, data)
		SELECT 'file.ready', 'acme', gen_random_uuid(), now() - interval '10 days' + i * interval '1 second', '{}'::jsonb
		FROM generate_series(1, 1100) AS i`)
	require.NoError(t, err)
	_, err = w.pool.Exec(ctx, `UPDATE uploaded_file_event_sink SET after_tx = (SELECT max(tx) FROM uploaded_file_event), after_seq = (SELECT max(seq) FROM uploaded_file_event)`)
	require.NoError(t, err)
	_, err = w.pool.Exec(ctx, `INSERT INTO uploaded_file_event_parked (sink, event_seq, attempts, parked_at)
		SELECT 'hook', seq, 1, now() FROM uploaded_file_event ORDER BY occurred_at LIMIT 1050`)
	require.NoError(t, err)
	secret := newSecret(t)
	rc := newReceiver(t, secret)
	r, err := eventrelay.New(w.pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{hook(t, "hook", rc.srv.URL, secret)}, Retention: 24 * time.Hour})
	require.NoError(t, err)
	n, err := r.Prune(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 50, n, "the 50 passed events behind 1,050 parked ones")
	var left int
	require.NoError(t, w.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file_event").Scan(&left))
	require.Equal(t, 1050, left, "the parked events stay")
}
