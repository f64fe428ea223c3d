package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The appended access line (lineAccess, what serve writes) must say what
// the slog one (slogAccess over slog's JSON handler, what a host's logger
// gets) says: the same keys in the same order with the same values, for
// plain and hostile request ids (a client chooses X-Request-Id), every
// size of duration, with and without a trace.
func TestAppendedAccessLineIsTheSlogLine(t *testing.T) {
	at := time.Date(2026, 11, 26, 21, 8, 50, 838624666, time.UTC)
	ids := []string{"", "41eb7a0afa037c21", `quote " backslash \ slash /`, "tab\tnewline\ncr\rnul\x00bell\x07",
		"<script>&amp;</script>", "ünïcödé ✓ 日本", "invalid \xff\xfe utf-8", "line\u2028separator\u2029", strings.Repeat("x", 128)}
	durations := []time.Duration{0, time.Microsecond, 999 * time.Nanosecond, 4571 * time.Microsecond,
		1234*time.Millisecond + 5*time.Microsecond, 90 * time.Minute, 1000 * time.Hour}
	for i, id := range ids {
		for j, d := range durations {
			a := access{
				at: at.Add(time.Duration(i*j) * time.Millisecond), method: "GET", route: "GET /uploaded-file/{id}/download",
				status: 200 + i, elapsed: d, bytesIn: int64(i) << 40, bytesOut: int64(j) * 65536, requestID: id,
			}
			if j%2 == 1 {
				a.traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
			}
			if i == 0 {
				a.method, a.route = "PROPFIND", "unmatched"
			}
			var appended, logged bytes.Buffer
			lineAccess{w: &appended}.write(context.Background(), a)
			slogAccess{h: slog.NewJSONHandler(&logged, nil)}.write(context.Background(), a)
			require.Equal(t, orderedJSON(t, logged.String()), orderedJSON(t, appended.String()),
				"request id %q, %s:\nslog:     %sappended: %s", id, d, logged.String(), appended.String())
			require.True(t, strings.HasSuffix(appended.String(), "}\n") && strings.Count(appended.String(), "\n") == 1,
				"one line: %q", appended.String())
		}
	}
}

// orderedJSON decodes one JSON object into its keys and values in order.
func orderedJSON(t *testing.T, line string) []any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var out []any
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	for dec.More() {
		key, err := dec.Token()
		require.NoError(t, err)
		var v any
		require.NoError(t, dec.Decode(&v))
		out = append(out, key, v)
	}
	_, err = dec.Token()
	require.NoError(t, err)
	_, err = dec.Token()
	require.ErrorIs(t, err, io.EOF, "one object: %q", line)
	return out
}
