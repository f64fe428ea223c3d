package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/faultproxy"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// fleetOutage is how long each shared outage of TestFleet lasts (the
// database refusing connections; the object store stopped); `make fleet`
// sets it (`-fleet.outage=10s`).
var fleetOutage = flag.Duration("fleet.outage", 3*time.Second, "how long each of TestFleet's shared outages lasts")

// outageProbe is one request sent through the balancer during an outage.
type outageProbe struct {
	name string
	req  func() *http.Request
	// code is the problem code a 503 must carry; empty when the route does
	// not need the missing dependency and answers 200 throughout.
	code string
}

// duringOutage sends every probe through the balancer every 200 ms for d
// while a dependency every replica shares is down. That dependency never
// takes the replicas out of the balancer, so each answer is the service's
// own: 200 from a route that does not need it, else the service's 503
// problem with Retry-After -- never the balancer's page for a pool with
// no server left.
func (f *fleet) duringOutage(d time.Duration, probes ...outageProbe) {
	t := f.t
	hc := &http.Client{Timeout: 30 * time.Second}
	problems := map[string]int{}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, p := range probes {
			resp, err := hc.Do(p.req())
			require.NoError(t, err, "%s during the outage", p.name)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				continue
			}
			require.NotEmpty(t, p.code, "%s does not need what is down: %d %s", p.name, resp.StatusCode, body)
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s during the outage: %s", p.name, body)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), "the service's problem, not the balancer's page: %s", body)
			require.NotEmpty(t, resp.Header.Get("Retry-After"), "%s: a 503 says when to retry", p.name)
			require.Contains(t, string(body), p.code, p.name)
			problems[p.name]++
		}
	}
	for _, p := range probes {
		if p.code != "" {
			require.Positive(t, problems[p.name], "the outage was seen by %s", p.name)
		}
	}
}

// probeToken is a bearer token of the probes' caller.
func (f *fleet) probeToken() string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "prober", "tenant": "tenant-0", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(f.secret)
	require.NoError(f.t, err)
	return tok
}

// listProbe asks for one page of the caller's files.
func (f *fleet) listProbe(code string) outageProbe {
	tok := f.probeToken()
	return outageProbe{name: "list", code: code, req: func() *http.Request {
		req, err := http.NewRequest(http.MethodGet, f.lb+"/uploaded-file?limit=1", nil)
		require.NoError(f.t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		return req
	}}
}

// detailProbe asks for the details of file id.
func (f *fleet) detailProbe(id, code string) outageProbe {
	tok := f.probeToken()
	return outageProbe{name: "detail", code: code, req: func() *http.Request {
		req, err := http.NewRequest(http.MethodGet, f.lb+"/uploaded-file/"+id, nil)
		require.NoError(f.t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		return req
	}}
}

// bufferProbe uploads a small file in one request (its bytes go to the
// store before it is answered).
func (f *fleet) bufferProbe(code string) outageProbe {
	tok := f.probeToken()
	n := 0
	return outageProbe{name: "buffer upload", code: code, req: func() *http.Request {
		n++
		var form bytes.Buffer
		w := multipart.NewWriter(&form)
		part, err := w.CreateFormFile("file", fmt.Sprintf("probe-%d.txt", n))
		require.NoError(f.t, err)
		_, _ = part.Write([]byte("probe"))
		require.NoError(f.t, w.Close())
		req, err := http.NewRequest(http.MethodPost, f.lb+"/uploaded-file", &form)
		require.NoError(f.t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", w.FormDataContentType())
		return req
	}}
}

// probeFile uploads one file through the balancer and returns its id.
func (f *fleet) probeFile() string {
	resp, err := http.DefaultClient.Do(f.bufferProbe("").req())
	require.NoError(f.t, err)
	defer resp.Body.Close()
	var file struct {
		ID string `json:"id"`
	}
	require.Equal(f.t, http.StatusCreated, resp.StatusCode)
	require.NoError(f.t, json.NewDecoder(resp.Body).Decode(&file))
	return file.ID
}

// recovered waits until every probe answers 2xx again, with no replica
// restarted.
func (f *fleet) recovered(probes ...outageProbe) {
	require.Eventually(f.t, func() bool {
		for _, p := range probes {
			resp, err := http.DefaultClient.Do(p.req())
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "the fleet answers again after the outage, no replica restarted")
}

// databaseOutage refuses the database's connections for *fleetOutage:
// lists answer 200 or the database's 503; afterwards the fleet answers
// again by itself.
func (f *fleet) databaseOutage(pool *pgxpool.Pool) {
	list := f.listProbe("core.database.unavailable")
	restore := pgtest.CutConnections(f.t, pool)
	f.duringOutage(*fleetOutage, list)
	restore()
	f.recovered(list)
}

// storeOutage stops the object store for *fleetOutage (every connection
// to it reset, every new one refused): what needs no bytes -- a list, a
// file's details -- answers 200 throughout; an upload answers the
// store's 503. Afterwards uploads succeed again by themselves.
func (f *fleet) storeOutage() {
	list, detail := f.listProbe(""), f.detailProbe(f.probeFile(), "")
	upload := f.bufferProbe("core.storage.unavailable")
	f.storeProxy.Set(faultproxy.Refuse)
	f.duringOutage(*fleetOutage, list, detail, upload)
	f.storeProxy.Set(faultproxy.Pass)
	f.recovered(list, detail, upload)
}
