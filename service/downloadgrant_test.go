package service_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// FuzzGrantOf holds GrantOf's in-place reading of a query to what
// url.ParseQuery and Values.Get answer for it, whatever the query: the
// fast path may only skip work, never read another grant or expiry.
func FuzzGrantOf(f *testing.F) {
	for _, q := range []string{
		"expires=1796083200&grant=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0-P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn8",
		"grant=a_b-c&expires=1",
		"grant=first&grant=second&expires=1&expires=2",
		"grant&expires",
		"grant=&expires=",
		"expires=1",
		"",
		"&&grant=x&&",
		"==grant=x",
		"gr%61nt=x&expires=1",
		"grant=a%2Bb&expires=1",
		"grant=a+b&expires=1",
		"grant=x;expires=1",
		"expires=1;x=2&grant=y",
		"grant=%zz&expires=1",
		"x=1&grant=y=z&expires=3=4",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw)
		g, ok := service.GrantOf(raw)
		require.Equal(t, q.Has("grant"), ok, "has a grant: %q", raw)
		require.Equal(t, q.Get("grant"), g.Grant, "grant of %q", raw)
		require.Equal(t, q.Get("expires"), g.Expires, "expires of %q", raw)
	})
}
