package main

// The load generator's HTTP client and its requests: one pool of
// connections for every load (each load closes the idle ones first:
// load), requests that read their answer (do) and downloads that drain
// theirs (drain).

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// client is the generator's one HTTP client, up to 64 connections to
// each server.
var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}, Timeout: 2 * time.Minute}

// do sends req and returns the body it answers with, which must come
// with the status want.
func do(req *http.Request, want int) ([]byte, error) {
	resp, err := send(req, want)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// send sends req; an answer without the status want is an error quoting
// the start of its body.
func send(req *http.Request, want int) (*http.Response, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return resp, nil
}

// drainBuffers are the 64 KiB buffers drain reads bodies through.
var drainBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// drain sends req, which must answer 200 with size bytes, and reads the
// body through a pooled buffer into nothing: a download's load generator
// that keeps no copy. Reading each body into a fresh slice (do) cost the
// generator -- on the same two cores as the servers it compares -- more
// CPU per 10 MiB download than the server's own, and its collector's
// timing moved the rows from one round to the next.
func drain(req *http.Request, size int) error {
	resp, err := send(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := drainBuffers.Get().(*[]byte)
	defer drainBuffers.Put(buf)
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, *buf) // not io.Discard's own 8 KiB reads
	switch {
	case err != nil:
		return err
	case n != int64(size):
		return fmt.Errorf("%s %s: %d bytes, want %d", req.Method, req.URL.Path, n, size)
	}
	return nil
}

// authed is a request carrying the bench's bearer token.
func (e *env) authed(method, url string, body io.Reader) *http.Request {
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Authorization", "Bearer "+e.token)
	return req
}

// get is one unauthenticated GET that must answer 200.
func get(u string) error {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	_, err := do(req, http.StatusOK)
	return err
}

// drainURL is drain of an unauthenticated GET of u.
func drainURL(u string, size int) error {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return drain(req, size)
}
