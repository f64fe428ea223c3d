package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/jetstream"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/webhook"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// natsURL is the machine's NATS server with JetStream.
const natsURL = "nats://127.0.0.1:4222"

// webhookSecret signs the bench's webhook sink.
var webhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("bench-webhook-secret-0123456789ab"))

// benchEvents compares uploads on a server with one webhook sink and one
// NATS sink configured (its relay delivering while the uploads run) with
// a server started alike with none, in pairRounds interleaved rounds; then
// measures the relay's sustained delivery rate to each kind of sink.
func benchEvents(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	hookURL, stopHook, err := discardingServer("/hook", http.StatusNoContent, "")
	if err != nil {
		return err
	}
	defer stopHook()
	stream := fmt.Sprintf("UFBENCH_%d", time.Now().UnixNano())
	defer deleteStream(stream)
	// Both servers are started alike, on fresh databases and file roots,
	// 16 connections each (see benchQuota): the bench's main server holds
	// by now every earlier section's rows and files, which made the
	// comparison one of database states too.
	const conns = "pool_max_conns=16"
	plain, stopPlain, err := startVariant(ctx, bin, tmp, "events-off", secret, "", conns)
	if err != nil {
		return err
	}
	defer stopPlain()
	withSinks, stopSinks, err := startVariant(ctx, bin, tmp, "events", secret, fmt.Sprintf(`events:
  sinks:
    hook:
      webhook: {url: %s, secret: %s}
    bus:
      nats: {url: %s, subjectPrefix: %s, stream: %s}
`, hookURL, webhookSecret, natsURL, strings.ToLower(stream), stream), conns)
	if err != nil {
		return err
	}
	defer stopSinks()

	size, clients := 1<<20, 32
	body := payload(size)
	ct, form := multipartBody("data.csv", body)
	in := initiateInput(body)
	off := &env{uf: plain, token: e.token}
	on := &env{uf: withSinks, token: e.token}
	n := pairCalls(size)
	rs, m, err := measureRounds("events bench", pairRounds,
		func() stats { return load(clients, n, func(int) error { return off.bufferUpload(ct, form) }) },
		func() stats { return load(clients, n, func(int) error { return on.bufferUpload(ct, form) }) },
		func() stats { return load(8, n, func(int) error { return off.directUpload(in, body) }) },
		func() stats { return load(8, n, func(int) error { return on.directUpload(in, body) }) },
	)
	if err != nil {
		return err
	}
	for i, label := range []string{"buffer upload 1 MiB, 32 clients", "direct upload 1 MiB, 8 clients"} {
		off, with := m[2*i], m[2*i+1]
		d := ratioOf(rs, 2*i+1, 2*i)
		rep.add(label+": webhook + NATS sinks vs none", fmt.Sprintf("%s (%.0f vs %.0f uploads/s)", d, with.rps(), off.rps()), "≥ 0.9×", d.median >= 0.9)
	}
	if err := waitDelivered(ctx, withSinks.dsn); err != nil {
		return err
	}
	return benchSustainedDelivery(ctx, rep, hookURL, stream)
}

// waitDelivered waits up to a minute for the relay of the server on dsn
// to deliver every event to every sink.
func waitDelivered(ctx context.Context, dsn string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	var pending int64
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM uploaded_file_event e, uploaded_file_event_sink s WHERE (e.tx, e.seq) > (s.after_tx, s.after_seq)`).Scan(&pending); err != nil {
			return err
		}
		if pending == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pending != 0 {
		return fmt.Errorf("events bench: the relay left %d deliveries behind", pending)
	}
	return nil
}

// benchSustainedDelivery: an outbox of 20,000 events drained by one relay
// to one sink, for each kind of sink.
func benchSustainedDelivery(ctx context.Context, rep *report, hookURL, stream string) error {
	const events = 20_000
	hook, err := webhook.New(webhook.Config{URL: hookURL, Secret: webhookSecret})
	if err != nil {
		return err
	}
	bus, err := jetstream.New(ctx, jetstream.Config{URL: natsURL, SubjectPrefix: strings.ToLower(stream), Stream: stream})
	if err != nil {
		return err
	}
	defer bus.Close()
	for _, sink := range []struct {
		label string
		sink  eventrelay.Sink
	}{{"NATS JetStream", bus}, {"webhook (loopback)", hook}} {
		rate, err := relayRate(ctx, sink.sink, events)
		if err != nil {
			return fmt.Errorf("relay rate %s: %w", sink.label, err)
		}
		rep.add("event relay, sustained delivery to "+sink.label, fmt.Sprintf("%.0f events/s (%s events, batch 256)", rate, thousands(events)), "", true)
	}
	return nil
}

// relayRate fills a fresh outbox with n events and returns how many per
// second one relay delivers to sink.
func relayRate(ctx context.Context, sink eventrelay.Sink, n int) (float64, error) {
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return 0, err
	}
	defer drop()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `
INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, data)
SELECT 'file.ready', 'bench', f.id, now(), uploaded_file_event_data(jsonb_build_object(
    'id', f.id, 'user_id', 'bench', 'original_name', 'data.csv', 'size_bytes', 1048576,
    'content_type', 'text/csv', 'visibility', 'private', 'status', 'ready', 'is_temporary', false,
    'disposition', 'attachment', 'checksum', 'sha256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=',
    'created_at', now(), 'completed_at', now()))
FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, $1)) AS f`, n); err != nil {
		return 0, err
	}
	r, err := eventrelay.New(pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{{Name: "bench", Sink: sink}}, Batch: 256})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	done, idle := 0, 0
	for done < n {
		k, err := r.Pass(ctx)
		if err != nil {
			return 0, err
		}
		if k == 0 { // held back by a transaction open elsewhere on the server
			if idle++; idle > 1000 {
				return 0, fmt.Errorf("stalled after %d events", done)
			}
			time.Sleep(time.Millisecond)
		}
		done += k
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func deleteStream(name string) {
	nc, err := natsgo.Connect(natsURL)
	if err != nil {
		return
	}
	defer nc.Close()
	if j, err := js.New(nc); err == nil {
		_ = j.DeleteStream(context.Background(), name)
	}
}
