package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
)

// serveOperator starts the operator listeners: /metrics (--metrics-listen;
// a loopback one in development) and pprof (--debug-listen). It returns
// the metrics URL for the printed help and a function that stops both.
func serveOperator(g *globals, o serveOptions, reg *prometheus.Registry, health *httpapi.Health) (string, func(), error) {
	var stops []func()
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	if o.metrics == "" && o.dev {
		o.metrics = "127.0.0.1:0"
	}
	metricsURL := "off (--metrics-listen)"
	if o.metrics != "" {
		addr, stop, err := serveMetrics(o.metrics, reg, health)
		if err != nil {
			return "", nil, err
		}
		stops = append(stops, stop)
		metricsURL = "http://" + addr + "/metrics"
		g.logger.Info("metrics listening", "addr", addr)
		fmt.Fprintf(g.stdout, "metrics on %s\n", metricsURL)
	}
	if o.debug != "" {
		addr, stop, err := serveDebug(o.debug)
		if err != nil {
			stopAll()
			return "", nil, err
		}
		stops = append(stops, stop)
		g.logger.Info("debug listening", "addr", addr)
	}
	return metricsURL, stopAll, nil
}

// serveMetrics serves /metrics and /dependencies (the state of every
// readiness gate and shared dependency, as JSON) on their own listener, for the operator's
// scraper: the public listener never serves it. It returns the bound
// address and a function that stops it.
func serveMetrics(addr string, reg *prometheus.Registry, health *httpapi.Health) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("serve: metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /dependencies", health.ServeDependencies)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// serveDebug serves the pprof handlers on their own listener, apart from
// the API (no token: bind it to loopback).
// It returns the bound address and a function that stops it.
func serveDebug(addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("serve: debug listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
