package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/db"
)

// replayFlags are events replay --since's options.
type replayFlags struct {
	since, sink string
	resume      bool
}

// selection names what the flags choose: a checkpoint's key.
func (f replayFlags) selection() string { return "since=" + f.since + " sink=" + f.sink }

// replayBatch is how many events one statement queues.
const replayBatch = 1000

// errReplayInterrupted: a replay stopped by a signal (the batch in flight
// queued, its checkpoint written).
var errReplayInterrupted = errors.New("events replay interrupted: go on with --resume (and the same --since and --sink)")

// replayCursor is where a replay stands: the last event queued, in
// (occurred_at, seq) order, and the --since resolved when it began.
type replayCursor struct {
	since, at time.Time
	seq       int64
}

// key is the cursor as the checkpoint's after_key: "<occurred_at>/<seq>".
func (c replayCursor) key() string {
	return c.at.UTC().Format(time.RFC3339Nano) + "/" + strconv.FormatInt(c.seq, 10)
}

// parseReplayKey reads a checkpoint's after_key back.
func parseReplayKey(key string) (time.Time, int64, error) {
	at, seq, ok := strings.Cut(key, "/")
	t, terr := time.Parse(time.RFC3339Nano, at)
	n, nerr := strconv.ParseInt(seq, 10, 64)
	if !ok || terr != nil || nerr != nil {
		return time.Time{}, 0, fmt.Errorf("events replay: the checkpoint %q is not a replay's", key)
	}
	return t, n, nil
}

// replayStart is where the replay begins: after its checkpoint with
// --resume, else before the first event at or after --since.
func replayStart(ctx context.Context, conn db.Conn, f replayFlags) (replayCursor, error) {
	if !f.resume {
		t, err := parseCutoff(f.since, time.Now())
		return replayCursor{since: t, at: t.Add(-time.Microsecond)}, err
	}
	cp, err := db.New().CheckpointGet(ctx, conn, db.CheckpointGetParams{Command: "events replay", Selection: f.selection()})
	if errors.Is(err, db.ErrNoRows) {
		return replayCursor{}, fmt.Errorf("events replay --resume: no interrupted replay of this selection (%s) to resume", f.selection())
	}
	if err != nil {
		return replayCursor{}, err
	}
	if cp.AfterKey == nil || cp.Since == nil {
		return replayCursor{}, fmt.Errorf("events replay: the checkpoint of %s is not a replay's", f.selection())
	}
	at, seq, err := parseReplayKey(*cp.AfterKey)
	return replayCursor{since: *cp.Since, at: at, seq: seq}, err
}

// runReplay queues every event since --since for delivery again, a batch
// at a time in the order they occurred, with its progress (events queued
// of the planner's estimate), its checkpoint after every batch once
// interrupted or every ten batches, and the summary. An interrupted run
// says where it stopped and exits non-zero; a run that ends removes its
// checkpoint.
func runReplay(ctx context.Context, g *globals, conn db.Conn, f replayFlags) error {
	q := db.New()
	key := db.CheckpointGetParams{Command: "events replay", Selection: f.selection()}
	c, err := replayStart(ctx, conn, f)
	if err != nil {
		return err
	}
	save := func() {
		k := c.key()
		g.saveCheckpoint(ctx, conn, db.CheckpointSaveParams{Command: key.Command, Selection: key.Selection, Since: &c.since, AfterKey: &k})
	}
	total, _ := db.EstimateEventsSince(ctx, conn, c.at) // an estimate: none is no total
	shown := g.startProgress("events replay", "events", total)
	var events, queued int64
	interrupted := false
	p := db.EventReplayRequestBatchParams{Since: c.since, Max: replayBatch}
	if f.sink != "" {
		p.Sink = &f.sink
	}
	work := context.WithoutCancel(ctx) // a batch begun is queued: it is one short statement
	for batches := 1; ; batches++ {
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		p.AfterAt, p.AfterSeq = c.at, c.seq
		row, err := q.EventReplayRequestBatch(work, conn, p)
		if err != nil {
			shown.finish()
			return err
		}
		if row.Events == 0 {
			break
		}
		events, queued = events+row.Events, queued+row.Queued
		c.at, c.seq = row.LastAt, row.LastSeq
		shown.set(int(events))
		if batches%10 == 0 {
			save()
		}
	}
	shown.finish()
	if interrupted {
		save()
	}
	if err := g.emit(fmt.Sprintf("events replay: %d events, %d deliveries queued\n", events, queued),
		map[string]any{"command": "events replay", "events": events, "queued": queued, "interrupted": interrupted}); err != nil {
		return err
	}
	if interrupted {
		return errReplayInterrupted
	}
	return q.CheckpointClear(context.WithoutCancel(ctx), conn, db.CheckpointClearParams(key))
}
