# uploadedfile -- build, generate, verify, test.
#
#   make test       verify, then every test with the race detector (the CI command)
#   make build      bin/uploadedfile, its version stamped with the commit
#   make build-vips bin/uploadedfile with the libvips image engine (needs libvips-dev)
#   make generate   regenerate gen/ from db/queries and api/openapi.yaml
#   make check      the fast loop (< 1 min, no libvips, npm or PostgreSQL): gofmt, tidy, vet, staticcheck, golangci-lint, generated Go code, structure tests
#   make verify     generated code fresh, go vet, staticcheck, golangci-lint, gofmt, go mod tidy
#   make fuzz       every fuzz target for FUZZTIME each (default 60s)
#   make ts         install and build the TypeScript client, the Uppy plugin and the web page's packages
#   make web        bundle the development upload page (internal/adapter/webui/dist)
#   make chaos      the chaos test for CHAOS_DURATION (default 2m)
#   make fleet      three serve replicas behind HAProxy under kills and 10 s outages for FLEET_DURATION (default 2m), with its summary
#   make hostile    the hostile-input suite against a real serve, with its summary (also run by make test)
#   make faults     every dependency behind a fault proxy through every mode, with its summary (also run by make test)
#   make upgrade    the previous release's replicas rolled to this one behind HAProxy under load (also run by make test)
#   make bench      the quick benchmark set, side by side with its peers (< 10 min)
#   make bench-full the whole benchmark matrix
#   make bench-scale the service's calls at 10 million files against 100k
#
# Tools are pinned in tools/go.mod and run with `go tool -modfile=tools/go.mod`.

# bash with pipefail: a recipe that filters a test's output still fails
# when the test does.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c

GO       ?= go
TOOL     := $(GO) tool -modfile=tools/go.mod
GOFILES   = $(shell git ls-files '*.go' | grep -v '^gen/')

FUZZTIME ?= 60s
CHAOS_DURATION ?= 2m
FLEET_DURATION ?= 2m
FLEET_OUTAGE ?= 10s

TS := clients/typescript

.PHONY: check vet-go staticcheck-go lint-go verify-generated-go upgrade faults build build-vips libvips lint bench bench-scale bench-full bench-peers chaos fleet hostile all generate verify verify-generated vet staticcheck fmt-check tidy-check test test-only s3-servers postgres tools fuzz ts web lint-openapi

all: verify

## build: the binary, with the commit stamped into `uploadedfile version`
## (whatever the toolchain's VCS stamping can see).
build:
	$(GO) build -ldflags "-X main.buildCommit=$$(git rev-parse HEAD 2>/dev/null)" -o bin/uploadedfile ./cmd/uploadedfile

## build-vips: the binary with the vips image engine as well (cgo;
## Debian: apt-get install libvips-dev). `uploadedfile version` names it.
build-vips: libvips
	$(GO) build -tags vips -ldflags "-X main.buildCommit=$$(git rev-parse HEAD 2>/dev/null)" -o bin/uploadedfile ./cmd/uploadedfile

## libvips: fail, saying what to install, when libvips' headers are missing
## (the vips engine's checks and tests need them; the default build does not).
libvips:
	@pkg-config --exists 'vips >= 8.13' || { echo "libvips 8.13 or later with its headers is missing: apt-get install -y libvips-dev"; exit 1; }

## tools: build the pinned tools once (cached by the Go build cache).
tools:
	$(TOOL) -n sqlc >/dev/null
	$(TOOL) -n staticcheck >/dev/null
	$(TOOL) -n golangci-lint >/dev/null
	$(GO) tool -modfile=tools/minio/go.mod -n minio >/dev/null

## generate: typed SQL (gen/db) from db/queries against db/migrations; the
## strict server (gen/api) and the Go client (gen/client) from api/openapi.yaml.
generate:
	$(TOOL) sqlc generate
	$(TOOL) oapi-codegen -config api/server.cfg.yaml api/openapi.yaml
	$(TOOL) oapi-codegen -config api/client.cfg.yaml api/openapi.yaml
	cd $(TS) && npm run --silent generate

## ts: install the client packages' workspace (clients/: the TypeScript
## client and the Uppy plugin), the web page's and the pack test's apps'
## pinned packages; compile the client and the plugin (type checks).
ts:
	cd clients && npm ci --no-audit --no-fund --loglevel=error && npm run build --workspaces --silent
	cd clients/pack-test/esbuild-uppy6 && npm ci --no-audit --no-fund --loglevel=error
	cd clients/pack-test/vite-uppy5 && npm ci --no-audit --no-fund --loglevel=error
	cd clients/codegen && npm ci --no-audit --no-fund --loglevel=error
	cd web && npm ci --no-audit --no-fund --loglevel=error

## web: bundle the development upload page into internal/adapter/webui/dist (embedded
## in the binary; committed, and checked fresh by make verify).
web: ts
	cd web && node build.mjs ../internal/adapter/webui/dist

## lint-openapi: lint api/openapi.yaml with Redocly CLI (needs make ts).
lint-openapi:
	cd $(TS) && npx redocly lint --config redocly.yaml ../../api/openapi.yaml

## verify-generated-go: fail when the Go code generated from db/queries and
## api/openapi.yaml differs from what the generators produce (regenerated
## into a temporary directory; the working tree is not touched).
verify-generated-go:
	$(TOOL) sqlc diff
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	sed "s#^output: .*#output: $$tmp/api.gen.go#" api/server.cfg.yaml > $$tmp/server.cfg.yaml && \
	sed "s#^output: .*#output: $$tmp/client.gen.go#" api/client.cfg.yaml > $$tmp/client.cfg.yaml && \
	$(TOOL) oapi-codegen -config $$tmp/server.cfg.yaml api/openapi.yaml && \
	$(TOOL) oapi-codegen -config $$tmp/client.cfg.yaml api/openapi.yaml && \
	diff -u gen/api/api.gen.go $$tmp/api.gen.go >/dev/null && diff -u gen/client/client.gen.go $$tmp/client.gen.go >/dev/null || \
	{ echo "gen/api or gen/client is stale: run make generate"; exit 1; }

## verify-generated: the Go code above, the TypeScript schema and the
## embedded web page (these two need make ts).
verify-generated: verify-generated-go
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	(cd $(TS) && npx openapi-typescript ../../api/openapi.yaml -o $$tmp/schema.d.ts >/dev/null 2>&1) && \
	diff -u $(TS)/src/schema.d.ts $$tmp/schema.d.ts >/dev/null || \
	{ echo "$(TS)/src/schema.d.ts is stale: run make generate"; exit 1; }
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	(cd web && node build.mjs $$tmp) && diff -r internal/adapter/webui/dist $$tmp >/dev/null || \
	{ echo "internal/adapter/webui/dist is stale: run make web"; exit 1; }

## vet, staticcheck: the default build, then the vips engine's files.
VIPS_PACKAGES := ./internal/imagevariant/ ./cmd/uploadedfile/
vet: vet-go libvips
	$(GO) vet -tags vips $(VIPS_PACKAGES)

vet-go:
	$(GO) vet ./...

staticcheck: staticcheck-go libvips
	$(TOOL) staticcheck -tags vips $(VIPS_PACKAGES)

staticcheck-go:
	$(TOOL) staticcheck ./...

## tidy-check: go.mod and go.sum are what `go mod tidy` makes of them.
tidy-check:
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## lint: golangci-lint (.golangci.yml): imports in three groups, and no test
## kit in the code that ships; the vips engine's files too.
lint: lint-go libvips
	$(TOOL) golangci-lint run --build-tags vips $(VIPS_PACKAGES)

lint-go:
	$(TOOL) golangci-lint run ./...

## check: the fast loop -- gofmt, go mod tidy, go vet, staticcheck, golangci-lint, the
## generated Go code up to date and the repository's structure tests (file
## lengths, layers, nothing pointing outside the repository) -- with no
## libvips, npm or PostgreSQL. The vips build, the TypeScript side and
## every test stay in make test.
check: fmt-check tidy-check vet-go staticcheck-go lint-go verify-generated-go
	$(GO) test -count=1 ./internal/layers/

verify: ts verify-generated lint-openapi vet staticcheck lint fmt-check tidy-check

## postgres: start the local PostgreSQL cluster when it is not running.
postgres:
	@pg_isready -q -h 127.0.0.1 -p 5432 || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@for i in $$(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && exit 0; sleep 1; done; echo "PostgreSQL did not start"; exit 1

## test: the full check, as CI runs it, with the time of each step.
test:
	@for step in verify postgres test-only; do \
	  t0=$$(date +%s); $(MAKE) --no-print-directory $$step || exit 1; \
	  echo "== make $$step: $$(( $$(date +%s) - t0 )) s"; \
	done

## s3-servers: build the two S3 servers the tests start (cached by the Go
## build cache; MinIO's first build takes minutes, so not inside a test).
s3-servers:
	$(TOOL) -n versitygw >/dev/null
	$(GO) tool -modfile=tools/minio/go.mod -n minio >/dev/null

## test-only: every test on versitygw (the default S3 server of the tests),
## then the packages that use S3 again on MinIO; a failure on either fails.
## Then the database suite again on databases with an ICU collation (no
## statement may depend on the order the database's collation gives text),
## and the image engine's conformance suite on both engines (-tags vips).
S3_PACKAGES := ./internal/storage/s3/ ./service/ ./internal/adapter/httpapi/ ./internal/adapter/tracks/
test-only: s3-servers libvips
	$(GO) test -race -count=1 ./...
	UPLOADEDFILE_TEST_S3=minio $(GO) test -race -count=1 $(S3_PACKAGES)
	UPLOADEDFILE_TEST_ICU_LOCALE=en-US $(GO) test -race -count=1 ./db/...
	$(GO) test -race -count=1 -tags vips ./internal/imagevariant/

## fuzz: run every Fuzz* target of every package for FUZZTIME each. Their
## seed corpora also run in every `go test`.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$f ($$pkg, $(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## chaos: worker processes with random storage failures and kills, the
## tracks alongside, then settle and check the invariants (also run for a few
## seconds by `make test`).
chaos: postgres s3-servers
	$(GO) test -race -count=1 -run '^TestChaos$$' -v ./internal/adapter/tracks/ -args -chaos.duration=$(CHAOS_DURATION)

## fleet: three serve replicas on one database and one store behind
## HAProxy, driven through the uploader with a replica SIGKILLed every few
## seconds, the database refusing connections for FLEET_OUTAGE and (S3)
## the store stopped for as long, then settled and checked (also run for
## 20 s per driver, 3 s outages, by `make test`).
fleet: postgres s3-servers
	$(GO) test -count=1 -timeout 30m -run '^TestFleet$$' -v ./cmd/uploadedfile/ -args -fleet.duration=$(FLEET_DURATION) -fleet.outage=$(FLEET_OUTAGE) | grep -v '^=== '

## upgrade: the rollout of docs/operations.md with the previous release's
## binary (built from this repository's history: the commit before the
## newest migration) -- two old replicas behind HAProxy (docs/haproxy.cfg)
## under load from clients that never retry, migrate up waiting on a lock,
## an old replica killed and restarted, the roll, a roll back -- with its
## summary: 0 failed requests and the invariants.
upgrade: postgres
	$(GO) test -count=1 -timeout 30m -run '^TestUpgrade$$' -v ./cmd/uploadedfile/ | grep -v '^=== '

## hostile: every attack of docs/security.md against a real serve --dev,
## with the server's peak memory and open descriptors after each.
hostile: postgres
	$(GO) test -count=1 -run '^TestHostileSuite$$' -v ./cmd/uploadedfile/ | grep -v '^=== '

## faults: one serve with PostgreSQL, the S3 server and clamd each behind a
## fault proxy, every dependency through every mode (delay, throttle,
## black hole, refused), with its summary: each answered within its bound,
## recovered without a restart, leaks 0.
faults: postgres s3-servers
	$(GO) test -count=1 -run '^TestFaults$$' -v ./cmd/uploadedfile/ | grep -v '^=== '

## bench-peers: install the peers of the benchmarks: tus (@tus/server) and sharp (libvips).
bench-peers:
	cd bench/tus-peer && npm ci --no-audit --no-fund --loglevel=error
	cd bench/sharp-peer && npm ci --no-audit --no-fund --loglevel=error

## bench: the quick set; prints the table and records it in docs/performance.md.
bench: postgres bench-peers libvips
	$(GO) run -tags vips ./bench -write docs/performance.md

## bench-scale: the service's calls on a table of SCALE_ROWS files (10
## million) against the same at 100k, and the sizes per million files
## (no peers; writes its section of docs/performance.md).
SCALE_ROWS ?= 10000000
bench-scale: postgres
	$(GO) run ./bench -scale $(SCALE_ROWS) -write docs/performance.md

## bench-full: every size and concurrency.
bench-full: postgres bench-peers libvips
	$(GO) run -tags vips ./bench -full -write docs/performance.md
