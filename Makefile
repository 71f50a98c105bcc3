# Every target loops over every module; a failure in any module fails the
# target. Modules are built with GOWORK=off so that each one stands alone.
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
GO ?= go

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test fmt fmt-check vet lint tidy-check core-deps-check work bench demo demo-standalone fuzz accuracy browser

## test: format check, core dependency check, vet, staticcheck, a headless browser, and race tests in every module
test: fmt-check core-deps-check vet lint browser
	@set -e; for m in $(MODULES); do \
		echo "== go test $$m"; \
		(cd $$m && GOWORK=off $(GO) test -race -count=1 -timeout 5m ./...); \
	done
	@echo "== go test core (no race detector: the per-processor counters' plain adds)"
	@cd core && GOWORK=off $(GO) test -count=1 -run 'ProcCounter|Counts|Stats|Shadow' . && \
		GOWORK=off $(GO) test -tags gopherpace_atomic_counters -count=1 -run 'ProcCounter|Counts' .

## browser: install a headless Chromium from the OS packages, when missing, for the status page's browser test (it skips, saying why, where none can be installed)
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then \
		exit 0; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "no apt-get here: install Chromium yourself to run the status page's browser test"; \
	else \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		echo "== installing Chromium for the status page's browser test"; \
		($$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core) >/dev/null 2>&1 \
			|| echo "Chromium could not be installed: the status page's browser test will skip"; \
	fi

## fmt: gofmt every Go file
fmt:
	gofmt -w $(shell git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do \
		echo "== go vet $$m"; \
		(cd $$m && GOWORK=off $(GO) vet ./...); \
	done

## lint: staticcheck (pinned) in every module, with zero findings
lint:
	@set -e; for m in $(MODULES); do \
		echo "== staticcheck $$m"; \
		(cd $$m && GOWORK=off $(GO) run $(STATICCHECK) ./...); \
	done

## tidy-check: fail if any go.mod/go.sum is not tidy
tidy-check:
	@set -e; for m in $(MODULES); do \
		echo "== go mod tidy -diff $$m"; \
		(cd $$m && GOWORK=off $(GO) mod tidy -diff); \
	done

## core-deps-check: the core module requires nothing outside the standard library
core-deps-check:
	@deps=$$(cd core && GOWORK=off $(GO) list -m all | tail -n +2); \
	if [ -n "$$deps" ]; then echo "core/ must use the standard library only, but requires:"; echo "$$deps"; exit 1; fi; \
	echo "== core/ requires only the standard library"

## work: regenerate go.work from the modules in the tree
work:
	rm -f go.work
	$(GO) work init
	$(GO) work use -r .

FRAMEWORK_ADAPTERS := adapters/ginpace adapters/echopace adapters/fiberpace adapters/grpcpace

## bench: side-by-side benchmarks against peer libraries (a table with ratios to the fastest peer), gubernator's GLOBAL mode against ours on one cluster scenario, then each framework adapter against its bare framework; a failed part is reported and the rest still runs
bench:
	@status=0; \
	(cd bench && GOWORK=off $(GO) run ./cmd/benchtable) || status=1; \
	echo; echo "== cluster accuracy: gubernator GLOBAL and gopherpace, same scenario"; \
	(cd bench/clusteraccuracy && GOWORK=off $(GO) run .) || status=1; \
	for m in $(FRAMEWORK_ADAPTERS); do \
		echo "== $$m"; \
		(cd $$m && GOWORK=off $(GO) test -run '^$$' -bench . -benchtime 300ms . | grep -E '^Benchmark') || status=1; \
	done; \
	exit $$status

## accuracy: run the cluster simulator's scenarios, ours beside the reference design; print the table, write it into docs/accuracy.md and the plots into docs/accuracy/
accuracy:
	mkdir -p docs/accuracy
	cd core && GOWORK=off GOPHERPACE_ACCURACY_DIR=$(CURDIR)/docs/accuracy $(GO) test -count=1 -run '^TestAccuracyReport$$' . >/dev/null
	@sed -n '/^<!-- accuracy table/,/^<!-- end of accuracy table/p' docs/accuracy.md

## fuzz: run each fuzz target for a while
fuzz:
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzBucketNeverExceedsRate -fuzztime 30s .
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime 30s .
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzCountedDecidesLikeBucket -fuzztime 30s .
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzLeasingNeverExceedsRate -fuzztime 30s .
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzReceive -fuzztime 30s .
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzParseHost -fuzztime 30s ./clientip
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzLimitsAllOrNothing -fuzztime 30s .

## demo: three replicas gossiping over real memberlist on loopback, under skewed then uniform load
demo:
	cd examples && GOWORK=off $(GO) run ./cluster

## demo-standalone: one limiter, one server, no cluster
demo-standalone:
	cd examples && GOWORK=off $(GO) run ./standalone
