package httpapi_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// requestIDMember is a problem body's requestId member.
var requestIDMember = regexp.MustCompile(`,?"requestId":"[^"]*"`)

// anonymized is an error answer without what differs by request -- its
// request id (body and X-Request-Id) and Date -- after checking that the
// problem carries its request id, the same in the body and the header:
// what remains must be the same for every resource the answer is about.
func anonymized(t *testing.T, h http.Header, body []byte) (http.Header, string) {
	t.Helper()
	var p struct {
		RequestID string `json:"requestId"`
	}
	require.NoError(t, json.Unmarshal(body, &p), "a problem body: %s", body)
	require.NotEmpty(t, p.RequestID, "every error answer carries its request id: %s", body)
	require.Equal(t, p.RequestID, h.Get("X-Request-Id"), "the body's request id is the header's")
	h = h.Clone()
	h.Del("X-Request-Id")
	h.Del("Date")
	return h, requestIDMember.ReplaceAllString(string(body), "")
}
