package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/jetstream"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/variantsink"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/webhook"
)

// newEventsCommand is the operators' entry to the lifecycle event relay.
func newEventsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Run the lifecycle event relay, list parked events, replay events",
		Example: `  uploadedfile events relay --config /etc/uploadedfile.yaml
  uploadedfile events status
  uploadedfile events list --parked
  uploadedfile events replay 0192f0c4-6a1e-7c3d-9b2a-5e8f7a6b4c3d
  uploadedfile events replay --since 2026-11-22T00:00:00Z --sink billing`,
	}

	cmd.AddCommand(newEventsRelayCommand(g), newEventsStatusCommand(g), newEventsListCommand(g), newEventsReplayCommand(g))
	return cmd
}

// withConfiguredRelay opens the configured pool and builds the relay with
// the configured sinks (connecting to NATS). With eager variant presets it
// runs the built-in sink that generates them, as serve's relay does.
func withConfiguredRelay(ctx context.Context, g *globals, reg prometheus.Registerer, fn func(*eventrelay.Relay, *db.Pool) error) error {
	return withConfiguredPool(ctx, g, func(cfg fileConfig, pool *db.Pool) error {
		extra, closeExtra, err := cfg.builtinSinks(ctx, g, pool)
		if err != nil {
			return err
		}
		defer closeExtra()
		relay, closeSinks, err := cfg.Events.relay(ctx, pool, g, reg, extra...)
		if err != nil {
			return err
		}
		defer closeSinks()
		return fn(relay, pool)
	})
}

// newEventsRelayCommand is events relay.
func newEventsRelayCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "relay",
		Short:   "Deliver the event outbox to the configured sinks until stopped (replicas share the sinks)",
		Example: "  uploadedfile events relay --config /etc/uploadedfile.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConfiguredRelay(cmd.Context(), g, nil, func(r *eventrelay.Relay, _ *db.Pool) error {
				g.logger.Info("event relay running")
				return r.Run(cmd.Context())
			})
		},
	}
}

// newEventsStatusCommand is events status.
func newEventsStatusCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "Show each configured sink's backlog and failure state",
		Example: "  uploadedfile events status",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConfiguredRelay(cmd.Context(), g, nil, func(r *eventrelay.Relay, _ *db.Pool) error {
				if err := r.Ensure(cmd.Context()); err != nil {
					return err
				}
				rows, err := r.Status(cmd.Context())
				if err != nil {
					return err
				}
				if g.output == "json" {
					for _, s := range rows {
						v := map[string]any{"sink": s.Name, "backlog": s.Depth, "attempts": s.Attempts, "lastError": s.LastError}
						if s.Depth > 0 {
							v["nextEventAt"] = s.Oldest.UTC()
						}
						if err := g.emit("", v); err != nil {
							return err
						}
					}
					return nil
				}
				tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SINK\tBACKLOG\tNEXT EVENT AT\tATTEMPTS\tLAST ERROR")
				for _, s := range rows {
					next := "-"
					if s.Depth > 0 {
						next = s.Oldest.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", s.Name, s.Depth, next, s.Attempts, deref(s.LastError))
				}
				return tw.Flush()
			})
		},
	}
}

// newEventsListCommand is events list.
func newEventsListCommand(g *globals) *cobra.Command {
	var parked bool
	var limit int
	list := &cobra.Command{
		Use:     "list --parked",
		Short:   "List the events a sink parked after its last attempt",
		Example: "  uploadedfile events list --parked --limit 20",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !parked {
				return errors.New("events list: only --parked is listed (the outbox itself is in uploaded_file_event)")
			}
			return withConfiguredPool(cmd.Context(), g, func(_ fileConfig, pool *db.Pool) error {
				rows, err := db.New().EventListParked(cmd.Context(), db.Wrap(pool), int32(limit))
				if err != nil {
					return err
				}
				if g.output == "json" {
					for _, p := range rows {
						e := p.UploadedFileEvent
						if err := g.emit("", map[string]any{"event": e.ID, "type": e.Type, "file": e.FileID, "sink": p.Sink,
							"attempts": p.Attempts, "parkedAt": p.ParkedAt.UTC(), "lastError": p.LastError}); err != nil {
							return err
						}
					}
					return nil
				}
				tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "EVENT\tTYPE\tFILE\tSINK\tATTEMPTS\tPARKED AT\tLAST ERROR")
				for _, p := range rows {
					e := p.UploadedFileEvent
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, e.Type, e.FileID, p.Sink, p.Attempts,
						p.ParkedAt.UTC().Format(time.RFC3339), deref(p.LastError))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&parked, "parked", false, "list parked events")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")

	return list
}

// newEventsReplayCommand is events replay.
func newEventsReplayCommand(g *globals) *cobra.Command {
	var since, sink string
	var resume bool
	replay := &cobra.Command{
		Use:   "replay <event id> | --since <time> [--resume]",
		Short: "Queue events for delivery again (a parked event, or everything since a time)",
		Example: `  uploadedfile events replay 0192f0c4-6a1e-7c3d-9b2a-5e8f7a6b4c3d
  uploadedfile events replay --since 24h --sink billing
  uploadedfile events replay --since 24h --sink billing --resume`,
		Long: `Queue events for delivery again, to --sink or to every sink: the event with
the given id, or every event that occurred at or after --since (an RFC 3339
time, or an age like 24h). A parked event is unparked. The relay delivers
replays before new events; a receiver sees the same event ids again.

With --since the events are queued a batch at a time, in the order they
occurred, with the progress shown as for the maintenance commands. An
interrupt (SIGINT, SIGTERM) finishes the batch in flight, writes where the
replay stopped and exits non-zero; --resume with the same --since and
--sink goes on after it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && since == "" && !resume:
				id, err := uuid.Parse(args[0])
				if err != nil {
					return fmt.Errorf("events replay: %q is not an event id", args[0])
				}
				return replayOne(cmd.Context(), g, id, sink)
			case len(args) == 0 && since != "":
				return withConfiguredRelay(cmd.Context(), g, nil, func(r *eventrelay.Relay, pool *db.Pool) error {
					if err := r.Ensure(cmd.Context()); err != nil {
						return err
					}
					return runReplay(cmd.Context(), g, db.Wrap(pool), replayFlags{since: since, sink: sink, resume: resume})
				})
			default:
				return errors.New("events replay: give an event id or --since, not both (--resume goes with --since)")
			}
		},
	}
	replay.Flags().StringVar(&since, "since", "", "replay every event since this time (RFC 3339 or an age like 24h)")
	replay.Flags().StringVar(&sink, "sink", "", "only to this sink")
	replay.Flags().BoolVar(&resume, "resume", false, "go on from where an interrupted replay of the same --since and --sink stopped")

	return replay
}

// replayOne queues the event id for delivery again.
func replayOne(ctx context.Context, g *globals, id uuid.UUID, sink string) error {
	p := db.EventReplayRequestParams{ID: id}
	if sink != "" {
		p.Sink = &sink
	}
	return withConfiguredRelay(ctx, g, nil, func(r *eventrelay.Relay, pool *db.Pool) error {
		if err := r.Ensure(ctx); err != nil {
			return err
		}
		n, err := db.New().EventReplayRequest(ctx, db.Wrap(pool), p)
		if err != nil {
			return err
		}
		if err := g.emit(fmt.Sprintf("events replay: %d deliveries queued\n", n), map[string]any{"command": "events replay", "queued": n}); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("events replay: nothing matched (no such event, or no sink of that name)")
		}
		return nil
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// relay builds the relay with its configured sinks and extra (built-in)
// ones; closeSinks closes their connections.
func (c eventsConfig) relay(ctx context.Context, pool *db.Pool, g *globals, reg prometheus.Registerer, extra ...eventrelay.SinkConfig) (*eventrelay.Relay, func(), error) {
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	names := make([]string, 0, len(c.Sinks))
	for name := range c.Sinks {
		names = append(names, name)
	}
	sort.Strings(names)
	var sinks []eventrelay.SinkConfig
	for _, name := range names {
		sc := c.Sinks[name]
		sink, closeSink, err := sc.build(ctx, name)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if closeSink != nil {
			closers = append(closers, closeSink)
		}
		sinks = append(sinks, eventrelay.SinkConfig{
			Name: name, Types: sc.Types, Sink: sink, MaxAttempts: sc.MaxAttempts, Backoff: sc.Backoff, MaxBackoff: sc.MaxBackoff,
		})
	}
	sinks = append(sinks, extra...)
	r, err := eventrelay.New(pool, eventrelay.Config{
		Source: c.Source, Sinks: sinks, Batch: c.Batch, Interval: c.Interval, Lease: c.Lease, Retention: c.Retention,
		Logger: g.logger, Registerer: reg,
	})
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("events: %w", err)
	}
	return r, closeAll, nil
}

// builtinSinks are the relay's own sinks: with an eager variant preset,
// the one that generates eager variants after file.ready (it needs the
// configured service, closed by the returned func).
func (c fileConfig) builtinSinks(ctx context.Context, g *globals, pool *db.Pool) ([]eventrelay.SinkConfig, func(), error) {
	eager := false
	for _, p := range c.Variants.Presets {
		eager = eager || p.Eager
	}
	if !eager {
		return nil, func() {}, nil
	}
	svc, err := c.newService(ctx, g, pool)
	if err != nil {
		return nil, nil, err
	}
	return []eventrelay.SinkConfig{variantsink.Config(svc)}, func() { _ = svc.Close() }, nil
}

// build makes the sink's destination: exactly one of webhook and nats.
func (sc sinkConfig) build(ctx context.Context, name string) (eventrelay.Sink, func(), error) {
	where := "events.sinks." + name
	switch {
	case sc.Webhook.URL != "" && sc.NATS.URL != "":
		return nil, nil, fmt.Errorf("%s: configure webhook.url or nats.url, not both", where)
	case sc.Webhook.URL != "":
		s, err := webhook.New(webhook.Config{URL: sc.Webhook.URL, Secret: sc.Webhook.Secret, Timeout: sc.Webhook.Timeout})
		if err != nil {
			return nil, nil, fmt.Errorf("%s.webhook: %w", where, err)
		}
		return s, nil, nil
	case sc.NATS.URL != "":
		s, err := jetstream.New(ctx, jetstream.Config{URL: sc.NATS.URL, SubjectPrefix: sc.NATS.SubjectPrefix, Stream: sc.NATS.Stream, Timeout: sc.NATS.Timeout})
		if err != nil {
			return nil, nil, fmt.Errorf("%s.nats: %w", where, err)
		}
		return s, s.Close, nil
	default:
		return nil, nil, fmt.Errorf("%s: configure webhook.url or nats.url", where)
	}
}

// relayEnabled: serve runs the relay unless events.relay is false.
func (c eventsConfig) relayEnabled() bool { return c.Relay == nil || *c.Relay }
