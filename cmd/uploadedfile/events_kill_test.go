package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestMain lets a test start this binary as the real command line in a
// process of its own (UF_RUN_MAIN=1; the arguments after --): the relay the
// kill test SIGKILLs is `uploadedfile events relay`, not a stand-in.
func TestMain(m *testing.M) {
	if os.Getenv("UF_RUN_MAIN") == "1" {
		args := os.Args[slices.Index(os.Args, "--")+1:]
		cmd := newRootCommand(os.Stdout, os.Stderr)
		cmd.SetArgs(args)
		// As main: SIGTERM and SIGINT stop the command (a drain), not the
		// process.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := cmd.ExecuteContext(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "uploadedfile:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	removeBuilt()
	os.Exit(code)
}

// delivery is what a sink received: the event id, the file and the body.
type delivery struct {
	id, file string
	body     []byte
}

// sinkLog records deliveries in arrival order.
type sinkLog struct {
	mu  sync.Mutex
	all []delivery
}

func (l *sinkLog) add(d delivery) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, d)
	return len(l.all)
}

func (l *sinkLog) snapshot() []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// TestRelaySurvivesKills: `uploadedfile events relay` is SIGKILLed many
// times while a workload commits and rolls back transitions -- half of the
// kills land while the webhook receiver holds an unanswered request (after
// publish, before acknowledgement), half as a JetStream message arrives.
// After a last relay drains the outbox: every committed event reached both
// sinks, none that was rolled back did, each file's events arrived (first
// arrivals) in transition order, and a duplicate is always the same id with
// the same body.
func TestRelaySurvivesKills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	svc, err := service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: t.TempDir()}, pool)
	require.NoError(t, err)

	kills := make(chan string, 100)
	var inFlightKill atomic.Bool // one kill at a time; the next after the relay restarted
	// Half the kills of each kind: the two triggers race, and the sink
	// served first would otherwise take them all.
	var hookKills, busKills atomic.Int32

	// The webhook receiver: verifies with the Standard Webhooks library,
	// records the delivery, and sometimes asks for a kill before answering.
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("kill-test-secret-0123456789abcdef"))
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	var hookLog sinkLog
	killed := make(chan struct{}, 100)
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the relay died while sending
		}
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var e cloudevents.Event
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("not a CloudEvent: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		n := hookLog.add(delivery{id: e.ID(), file: e.Subject(), body: body})
		if n%11 == 5 && hookKills.Load() < 8 && inFlightKill.CompareAndSwap(false, true) {
			kills <- "webhook"
			<-killed // the relay is dead: this request was delivered, never acknowledged
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hookSrv.Close)

	// The JetStream sink's stream, watched by a plain subscription that
	// asks for a kill as messages arrive (the relay is then between its
	// publish and the acknowledgement's effect on its cursor).
	stream := fmt.Sprintf("UFKILL_%d", time.Now().UnixNano())
	prefix := strings.ToLower(stream)
	nc, err := natsgo.Connect(natsURL)
	require.NoError(t, err, "the NATS server with JetStream on 127.0.0.1:4222")
	t.Cleanup(nc.Close)
	jsc, err := js.New(nc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = jsc.DeleteStream(context.Background(), stream) })
	var seenOnBus atomic.Int64
	sub, err := nc.Subscribe(prefix+".>", func(*natsgo.Msg) {
		if seenOnBus.Add(1)%13 == 7 && busKills.Load() < 8 && inFlightKill.CompareAndSwap(false, true) {
			kills <- "nats"
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	cfgPath := filepath.Join(t.TempDir(), "relay.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
events:
  interval: 20ms
  batch: 16
  lease: 1s
  sinks:
    hook:
      maxAttempts: 1000
      backoff: 10ms
      maxBackoff: 50ms
      webhook:
        url: %s/hook
        secret: %s
        timeout: 5s
    bus:
      maxAttempts: 1000
      backoff: 10ms
      maxBackoff: 50ms
      nats:
        url: %s
        subjectPrefix: %s
        stream: %s
`, hookSrv.URL, secret, natsURL, prefix, stream)), 0o600))

	startRelay := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "--database-url", dbURL, "events", "relay", "--config", cfgPath)
		cmd.Env = append(os.Environ(), "UF_RUN_MAIN=1")
		cmd.Stderr = io.Discard
		require.NoError(t, cmd.Start())
		return cmd
	}

	// The workload: committed transitions, and attachments made inside a
	// transaction that is rolled back.
	stop := make(chan struct{})
	var rolledBack sync.Map // file id -> true
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := service.WithRequestContext(ctx, service.RequestContext{Tenant: fmt.Sprintf("tenant-%d", w%2), UserID: fmt.Sprintf("user-%d", w)})
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f, err := svc.Upload(user, strings.NewReader(fmt.Sprintf("w%d i%d\n", w, i)), "notes.txt", nil)
				if !assertNoError(t, err) {
					return
				}
				if i%3 == 0 {
					tx, err := pool.Begin(ctx)
					if !assertNoError(t, err) {
						return
					}
					assertNoError(t, svc.MarkUsed(user, []string{f.ID.String()}, &service.Meta{Entity: "draft"}, tx))
					assertNoError(t, tx.Rollback(ctx))
					rolledBack.Store(f.ID.String(), true)
					continue
				}
				assertNoError(t, svc.MarkUsed(user, []string{f.ID.String()}, &service.Meta{Entity: "invoice", EntityID: fmt.Sprint(i)}, nil))
				if i%2 == 0 {
					assertNoError(t, svc.DeleteByID(user, f.ID.String()))
				}
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			}
		}()
	}

	// Kill the relay as asked, until it has died 16 times, restarting it
	// after each kill.
	relay := startRelay()
	byKind := map[string]int{}
	deadline := time.After(3 * time.Minute)
	for byKind["webhook"]+byKind["nats"] < 16 {
		select {
		case kind := <-kills:
			require.NoError(t, relay.Process.Signal(syscall.SIGKILL))
			_ = relay.Wait()
			if kind == "webhook" {
				killed <- struct{}{}
			}
			byKind[kind]++
			if kind == "webhook" {
				hookKills.Add(1)
			} else {
				busKills.Add(1)
			}
			relay = startRelay()
			inFlightKill.Store(false)
		case <-deadline:
			t.Fatalf("only %v kills in 3 minutes", byKind)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("kills: %v", byKind)
	require.GreaterOrEqual(t, byKind["webhook"], 3, "kills between a webhook's publish and its acknowledgement")
	require.GreaterOrEqual(t, byKind["nats"], 3, "kills between a JetStream publish and the cursor")

	// Drain with the last relay, no more kills (a kill already asked for
	// is refused from here on).
	inFlightKill.Store(true)
	require.Eventually(t, func() bool {
		var depth int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM uploaded_file_event e, uploaded_file_event_sink s
			WHERE (e.tx, e.seq) > (s.after_tx, s.after_seq)`).Scan(&depth))
		return depth == 0
	}, 90*time.Second, 100*time.Millisecond, "the relay drains the outbox")
	require.NoError(t, relay.Process.Signal(syscall.SIGKILL))
	_ = relay.Wait()

	// The outbox: every committed event, in transition order per file.
	type outboxEvent struct{ id, file, typ string }
	rows, err := pool.Query(ctx, "SELECT id::text, file_id::text, type FROM uploaded_file_event ORDER BY tx, seq")
	require.NoError(t, err)
	var outbox []outboxEvent
	perFile := map[string][]string{}
	for rows.Next() {
		var e outboxEvent
		require.NoError(t, rows.Scan(&e.id, &e.file, &e.typ))
		outbox = append(outbox, e)
		perFile[e.file] = append(perFile[e.file], e.id)
		if e.typ == "file.attached" {
			_, rb := rolledBack.Load(e.file)
			require.False(t, rb, "a rolled-back attachment has no event")
		}
	}
	require.NoError(t, rows.Err())
	require.Greater(t, len(outbox), 200)
	want := map[string]bool{}
	for _, e := range outbox {
		want[e.id] = true
	}

	// The webhook: every event, nothing else, per-file order of first
	// arrivals, duplicates identical.
	index := map[string]int{} // event id -> its place among its file's events
	for _, ids := range perFile {
		for i, id := range ids {
			index[id] = i
		}
	}
	// checkSink: every event, nothing else, per-file order of first
	// arrivals, duplicates identical; it returns the duplicates and the
	// order breaks (an arrival of an event of a file older than one of the
	// same file that arrived before it, duplicates included).
	checkSink := func(name string, got []delivery) (dups, breaks int) {
		t.Helper()
		first := map[string][]byte{}
		arrivals := map[string][]string{}
		newest := map[string]int{}
		for _, d := range got {
			require.True(t, want[d.id], "%s received %s, which is not a committed event", name, d.id)
			if n, ok := newest[d.file]; ok && index[d.id] < n {
				breaks++
			}
			newest[d.file] = max(newest[d.file], index[d.id])
			if prev, seen := first[d.id]; seen {
				require.Equal(t, string(prev), string(d.body), "%s: a duplicate of %s differs", name, d.id)
				dups++
				continue
			}
			first[d.id] = d.body
			arrivals[d.file] = append(arrivals[d.file], d.id)
		}
		require.Len(t, first, len(want), "%s received every committed event", name)
		for file, ids := range perFile {
			require.Equal(t, ids, arrivals[file], "%s: the events of file %s in transition order", name, file)
		}
		t.Logf("%s: %d events, %d duplicates, %d order breaks", name, len(first), dups, breaks)
		return dups, breaks
	}
	// The documented bound (docs/events.md): the webhook sink's cursor
	// moves after each acknowledged POST, so a kill sends again at most
	// the one POST in flight -- never an older event of a file after a
	// newer one.
	dups, breaks := checkSink("webhook", hookLog.snapshot())
	require.LessOrEqual(t, dups, byKind["webhook"]+byKind["nats"], "at most one duplicate per kill")
	require.Zero(t, breaks, "no event of a file after a newer one of the same file")

	// The stream: what JetStream kept (its duplicate window drops
	// redeliveries by Nats-Msg-Id).
	cons, err := jsc.OrderedConsumer(ctx, stream, js.OrderedConsumerConfig{})
	require.NoError(t, err)
	var bus []delivery
	for len(bus) < len(want) {
		batch, err := cons.Fetch(500, js.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			var e cloudevents.Event
			require.NoError(t, json.Unmarshal(m.Data(), &e))
			require.Equal(t, e.ID(), m.Headers().Get("Nats-Msg-Id"))
			bus = append(bus, delivery{id: e.ID(), file: e.Subject(), body: m.Data()})
			n++
		}
		if n == 0 {
			break
		}
	}
	dups, breaks = checkSink("jetstream", bus)
	require.Zero(t, dups, "the stream holds each event once")
	require.Zero(t, breaks)
}

// natsURL is the machine's NATS server with JetStream.
const natsURL = "nats://127.0.0.1:4222"

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("workload: %v", err)
		return false
	}
	return true
}
