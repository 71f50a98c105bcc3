# Every target loops over every module; a failure in any module fails the
# target. Modules are built with GOWORK=off so that each one stands alone.
# core first: its tests take longest, and the others fit beside them.
MODULES := ./core $(filter-out ./core,$(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort))
GO ?= go

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# JOBS is how many modules are checked at once. Each module's go test runs
# its packages in parallel too; two modules at once keep both cores busy
# while the other links or waits on a test's timers.
JOBS ?= 2
# The quiet tests measure real clusters (real processes, real memberlist)
# against real time: they run after the modules, alone, and without the
# race detector, which slows every node several times over: beside four
# busy loops they hold without it and fail with it (docs/accuracy.md,
# "Fairness"). The same code runs under the race detector in memberpace's
# and rlserver's other cluster tests.
QUIET_MEMBERPACE := ^(TestFairnessOverRealMemberlist|TestSeparateProcesses|TestOversizedBatchIsSplit|TestInFlightOverRealMemberlist)$$
QUIET_RLSERVER := ^TestThreeReplicasEnforceOneEnvoyLimit$$
# The core's cluster simulations run every node, its timers and its
# network on the one goroutine that advances the in-memory network's
# virtual clock: the race detector has nothing to watch in them and made
# them 20 times slower (230 s of the core's race tests, 10 s without). They
# run without it, after the core's race tests; every code path they take
# also runs under it in the real-time and concurrent tests. So do the
# checks that read the core's source (each part writes only its own state;
# the layers as design.md draws them), which run no code of the core.
CORE_SIMS := ^(TestEachPartWritesOnlyItsOwnState|TestTheLayersAreAsDrawn|TestAccuracy|TestAccuracyKeyedTransitions|TestGroupedCluster|TestTinySharesDoNotBurst|TestLockstepArrivalsStayWithinTheBound|TestACutDoesNotStallTheShares|TestSimulationsRepeatExactly|TestMatesHearEachOtherDirectly|TestKeyedSharesFollowOfferedLoad|TestAFirstBurstThatWaitsForItsReportIsNotGated|TestAStormOverTenNodesNamesItsFiveHeavyKeys)$$
# Tools built once per checkout (untracked), and each part's time.
BIN := $(CURDIR)/.bin
TIMES := $(CURDIR)/.test-times

.PHONY: test fmt fmt-check vet lint tidy-check core-deps-check work bench bench-rls redis promtool helm demo demo-standalone fuzz accuracy browser tools check-modules transitions faults haproxy nftables release scale

## test: format check, core dependency check, then in every module (JOBS at a time) vet, staticcheck and race tests; a headless browser; prints how long each part took
test:
	@rm -f $(TIMES); t=$$(date +%s); \
	status=0; \
	$(MAKE) --no-print-directory fmt-check core-deps-check || status=1; \
	echo "checks (gofmt, core deps) $$(( $$(date +%s) - t ))s" >> $(TIMES); t=$$(date +%s); \
	$(MAKE) --no-print-directory tools browser promtool || status=1; \
	echo "tools (staticcheck build, Chromium, promtool) $$(( $$(date +%s) - t ))s" >> $(TIMES); t=$$(date +%s); \
	[ $$status -ne 0 ] || $(MAKE) --no-print-directory check-modules || status=1; \
	echo "modules, $(JOBS) at a time (wall) $$(( $$(date +%s) - t ))s" >> $(TIMES); t=$$(date +%s); \
	if [ $$status -eq 0 ]; then \
		echo "== go test, the real-time tests of memberpace and rlserver, alone"; \
		(cd adapters/memberpace && GOWORK=off $(GO) test -count=1 -run '$(QUIET_MEMBERPACE)' ./...) || status=1; \
		(cd adapters/rlserver && GOWORK=off $(GO) test -count=1 -run '$(QUIET_RLSERVER)' ./...) || status=1; \
		echo "real-time tests alone $$(( $$(date +%s) - t ))s" >> $(TIMES); t=$$(date +%s); \
	fi; \
	if [ $$status -eq 0 ]; then \
		echo "== go test core (no race detector: the per-processor counters' plain adds)"; \
		(cd core && GOWORK=off $(GO) test -count=1 -run 'ProcCounter|Counts|Stats|Shadow' . ./internal/bucket && \
			GOWORK=off $(GO) test -tags gopherpace_atomic_counters -count=1 -run 'ProcCounter|Counts' . ./internal/bucket) || status=1; \
		echo "core without the race detector $$(( $$(date +%s) - t ))s" >> $(TIMES); \
	fi; \
	echo; echo "== time taken"; cat $(TIMES); rm -f $(TIMES); \
	exit $$status

## tools: build the pinned staticcheck once into .bin/
tools: $(BIN)/staticcheck

$(BIN)/staticcheck: Makefile
	@echo "== building $(STATICCHECK)"
	@GOWORK=off GOBIN=$(BIN) $(GO) install $(STATICCHECK)

# One module's checks, in order: vet, staticcheck, race tests. Its output
# is kept and printed whole when it ends, so that parallel modules do not
# interleave; its times go to $(TIMES). The race tests run once more, and
# only once, when the race detector's runtime itself dies on an internal
# check ("ThreadSanitizer: CHECK failed") with no race reported and no
# test failed: a fault of the sanitizer itself, seen once in many CI
# runs; a race or a failed test is never retried.
define check_module
m=$$1; log=$$(mktemp); \
race_once() { (cd $$m && GOWORK=off $(GO) test -race -count=1 -timeout 10m -skip "$$skip" ./...); }; \
race_tests() { \
	out=$$(mktemp); race_once >$$out 2>&1; r=$$?; \
	if [ $$r -ne 0 ] && grep -q 'ThreadSanitizer: CHECK failed' $$out && ! grep -q -e 'WARNING: DATA RACE' -e '^--- FAIL' $$out; then \
		cat $$out; echo "-- the race detector's own runtime failed an internal check (no race, no failed test): the race tests once more"; \
		race_once >$$out 2>&1; r=$$?; \
	fi; \
	cat $$out; rm -f $$out; return $$r; }; \
case $$m in ./adapters/memberpace) skip='$(QUIET_MEMBERPACE)';; ./adapters/rlserver) skip='$(QUIET_RLSERVER)';; ./core) skip='$(CORE_SIMS)';; *) skip=;; esac; \
t0=$$(date +%s); (cd $$m && GOWORK=off $(GO) vet ./...) >$$log 2>&1 && \
t1=$$(date +%s) && (cd $$m && GOWORK=off $(BIN)/staticcheck ./...) >>$$log 2>&1 && \
t2=$$(date +%s) && race_tests >>$$log 2>&1 && \
(cd $$m && if [ "$$m" = ./core ]; then echo "-- the simulations and the source checks, without the race detector"; GOWORK=off $(GO) test -count=1 -timeout 10m -run "$$skip" .; fi) >>$$log 2>&1; \
rc=$$?; t3=$$(date +%s); \
echo "== $$m: vet, staticcheck, go test -race"; cat $$log; rm -f $$log; \
if [ $$rc -ne 0 ]; then echo "FAILED: $$m"; fi; \
echo "  $$m: vet $$(( $${t1:-$$t3} - t0 ))s, staticcheck $$(( $${t2:-$$t3} - $${t1:-$$t3} ))s, test $$(( t3 - $${t2:-$$t3} ))s" >> $(TIMES); \
exit $$rc
endef
export check_module

## check-modules: vet, staticcheck and race tests in every module, JOBS modules at a time
check-modules: tools
	@printf '%s\n' $(MODULES) | xargs -P $(JOBS) -n 1 sh -c "$$check_module" _

## vet: go vet in every module
vet:
	@set -e; for m in $(MODULES); do \
		echo "== go vet $$m"; \
		(cd $$m && GOWORK=off $(GO) vet ./...); \
	done

## lint: staticcheck (pinned, built once) in every module, with zero findings
lint: tools
	@set -e; for m in $(MODULES); do \
		echo "== staticcheck $$m"; \
		(cd $$m && GOWORK=off $(BIN)/staticcheck ./...); \
	done

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

## release: release every module at VERSION (make release VERSION=v0.2.0): a clean tree, make test, then every sibling require set to VERSION, committed, and one tag per library module in dependency order; prints what to push (docs/releasing.md)
release:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=v0.2.0"; exit 2; }
	@test -z "$$(git status --porcelain)" || { echo "release: the tree has uncommitted changes; commit or stash them first"; exit 1; }
	cd tools && GOWORK=off $(GO) run ./cmd/release -root .. -version $(VERSION) -dry-run
	$(MAKE) --no-print-directory test
	cd tools && GOWORK=off $(GO) run ./cmd/release -root .. -version $(VERSION)

## work: regenerate go.work from the modules in the tree
work:
	rm -f go.work
	$(GO) work init
	$(GO) work use -r .


## bench: side-by-side benchmarks against peer libraries (a table with ratios to the fastest peer), gubernator's GLOBAL mode against ours on one cluster scenario, then what each framework adapter adds to a request against its floors and its framework's own limiter; a failed part is reported and the rest still runs
bench:
	@status=0; \
	(cd bench && GOWORK=off $(GO) run ./cmd/benchtable) || status=1; \
	echo; echo "== cluster accuracy: gubernator GLOBAL and gopherpace, same scenario"; \
	(cd bench/clusteraccuracy && GOWORK=off $(GO) run .) || status=1; \
	echo; echo "== what each framework adapter adds, against its floors (docs/performance.md#middleware)"; \
	(cd bench && GOWORK=off $(GO) run ./cmd/middlewarecost) || status=1; \
	exit $$status

## bench-rls: Envoy's RateLimitService as envoyproxy/ratelimit (with a real redis-server, installed when missing) and gopherpace serve answer it, side by side: decisions/s and latency, three replicas of each behind round-robin, memory at a million descriptor values (docs/service.md#measured; RLSBENCH_FLAGS=-parts=... picks)
bench-rls: redis
	cd bench/rlsbench && GOWORK=off $(GO) run . $(RLSBENCH_FLAGS)

# apt_install installs the Debian package $(2) when the command $(1) is
# missing; without apt-get it says so and fails, unless $(3) is "optional".
define apt_install
	@if ! command -v $(1) >/dev/null 2>&1; then \
		command -v apt-get >/dev/null 2>&1 || { echo "no apt-get here: install $(2) yourself"; [ "$(3)" = optional ]; exit; }; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		echo "== installing $(2)"; \
		($$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $(2)) >/dev/null; \
	fi
endef

## redis: install redis-server from the OS packages when missing
redis:
	$(call apt_install,redis-server,redis-server)

## helm: install Helm from the Go module proxy into .bin/ and check deploy/helm's chart with it (helm lint, helm template against the chart tests' rendering); a few minutes the first time
helm:
	@[ -x $(BIN)/helm ] || { echo "== building helm.sh/helm/v4/cmd/helm@v4.3.2"; GOWORK=off GOBIN=$(BIN) $(GO) install helm.sh/helm/v4/cmd/helm@v4.3.2; }
	cd deploy && PATH=$(BIN):$$PATH GOWORK=off $(GO) test -count=1 -run 'Chart' -v . | grep -v '^=== RUN'

## promtool: Prometheus's rule checker, for deploy/'s alert rules (Debian's prometheus package; where apt-get is missing, their test says it skipped promtool)
promtool:
	$(call apt_install,promtool,prometheus,optional)

## accuracy: run the cluster simulator's scenarios, ours beside the reference design, and the scale rows at N = 10, 30, 100, 300 and 1,000 (SCALE_NODES picks; N = 1,000 takes about 4 min a row for 8 s); print the tables, write them into docs/accuracy.md and the plots into docs/accuracy/
SCALE_NODES ?= 10,30,100,300,1000
accuracy:
	mkdir -p docs/accuracy
	cd core && GOWORK=off GOPHERPACE_ACCURACY_DIR=$(CURDIR)/docs/accuracy GOPHERPACE_SCALE_NODES=$(SCALE_NODES) $(GO) test -count=1 -timeout 30m -run '^(TestAccuracyReport|TestScaleReport)$$' . >/dev/null
	@sed -n '/^<!-- accuracy table/,/^<!-- end of accuracy table/p;/^<!-- scale table/,/^<!-- end of scale table/p' docs/accuracy.md

## fuzz: run each fuzz target for a while
fuzz:
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzBucketNeverExceedsRate -fuzztime 30s ./internal/bucket
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime 30s ./internal/wire
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzOpenRelay -fuzztime 30s ./internal/wire
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzOpenDigest -fuzztime 30s ./internal/wire
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzDecodeGauges -fuzztime 30s ./internal/wire
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzCountedDecidesLikeBucket -fuzztime 30s ./internal/cluster
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzLeasingNeverExceedsRate -fuzztime 30s .
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzReceive -fuzztime 30s .
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzParseHost -fuzztime 30s ./clientip
	cd core && GOWORK=off $(GO) test -run '^$$' -fuzz FuzzLimitsAllOrNothing -fuzztime 30s .

## transitions: real HAProxy in front of real examples/server replicas under Poisson load through a crash, a rolling deploy, a rolling restart, a scale-out and a scale-in; prints the table docs/accuracy.md holds (RUNS=n runs of each; about 2.5 min a run of all)
RUNS ?= 1
transitions: haproxy
	cd examples && GOWORK=off $(GO) run ./transitions -runs $(RUNS) $(SCENARIOS)

## faults: real network faults between real replicas, each in a network namespace of its own behind a bridge (a replica cut off, a 3/2 split, a one-way cut, a flapping link, 5% and 20% loss, a SIGSTOP), with HAProxy and the load outside; prints the table docs/accuracy.md holds (as root; RUNS=n runs of each, FAULTS=names; about 5 min a run of all)
FAULTS ?=
faults: haproxy nftables
	cd examples && GOWORK=off $(GO) run ./faults -runs $(RUNS) $(FAULTS)

## haproxy: install HAProxy from the OS packages when missing
haproxy:
	$(call apt_install,haproxy,haproxy)

## nftables: install nftables from the OS packages when missing (the faults' packet loss and cuts; without it they are skipped)
nftables:
	$(call apt_install,nft,nftables,optional)

## scale: N replicas (NODES, default 50) in one process, each with its own memberlist on loopback, at 5x their shared limit for 10 s: total, every replica's share, datagrams and bytes each sends its peers (docs/accuracy.md#scale)
NODES ?= 50
scale:
	cd examples && GOWORK=off $(GO) run ./scale -nodes $(NODES)

## demo: three replicas gossiping over real memberlist on loopback, under skewed then uniform load
demo:
	cd examples && GOWORK=off $(GO) run ./cluster

## demo-standalone: one limiter, one server, no cluster
demo-standalone:
	cd examples && GOWORK=off $(GO) run ./standalone
