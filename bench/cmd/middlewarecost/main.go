// Command middlewarecost measures what each framework adapter adds to a
// request, against the floors in the same benchmark binary, and prints one
// table with the targets of docs/performance.md#middleware:
//
//   - added: the adapter per client IP with no fields, less the framework's
//     own cost of any middleware (a no-op middleware, the bare handler for
//     net/http, a pass-through interceptor for gRPC), as a multiple of a
//     bare Take of the same key (target ≤ 1.3×);
//   - draft: what the draft fields add over no fields, as a multiple of
//     the same Take (target ≤ 0.5×), and beside it the framework's own
//     share: its floor storing the same two fields as constants, less
//     the floor;
//   - own: the adapter against the framework's own limiter, like for like
//     (same fields, same key), where the framework has one (target ≤ 0.8×);
//   - allocations on the admit path (target 0, Echo v4's per-request
//     closure aside, which its no-op middleware pays too).
//
// It builds each adapter's test binary once and runs them in turn, round
// after round. The ratios come from each adapter's interleaved benchmark
// (conformance.Interleave: the parts serve batches in turn, so they run
// at the same moments), as the median over rounds of each round's ratio;
// for a tree without one, from the separate rows' medians. With -layouts
// N, each binary is built N times with its functions in a random order,
// the same N orders for every tree, and round r runs order r mod N: a
// hot path's luck with the linker's placement, worth several percent,
// then varies within the medians instead of deciding them. With -base (a
// second checkout, such as git archive of an earlier commit), both trees
// run in the same rounds and each gets its table: before and after, like
// for like. Run it from the bench directory (make bench does).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// An adapter is one benchmark binary and the names of its rows.
type adapter struct {
	name, dir, bench string
	floor            string // the framework's own cost of a middleware
	noFields, draft  string // ours, per IP
	own, ownOurs     string // the framework's limiter and ours like for like
	closureAllocs    float64
}

var adapters = []adapter{
	{name: "net/http (httplimit)", dir: "core/httplimit", bench: "BenchmarkMiddleware", floor: "bare", noFields: "per-ip/no-fields", draft: "per-ip/draft-fields"},
	{name: "Gin", dir: "adapters/ginpace", bench: "BenchmarkGin", floor: "noop-middleware", noFields: "ginpace/per-ip/no-fields", draft: "ginpace/per-ip/draft-fields"},
	{name: "Echo v4", dir: "adapters/echopace", bench: "BenchmarkEcho", floor: "noop-middleware", noFields: "echopace/per-ip/no-fields", draft: "echopace/per-ip/draft-fields",
		own: "echo-limiter/per-ip/no-fields", ownOurs: "echopace/per-ip/no-fields", closureAllocs: 1},
	{name: "Echo v5", dir: "adapters/echo5pace", bench: "BenchmarkEcho", floor: "noop-middleware", noFields: "echo5pace/per-ip/no-fields", draft: "echo5pace/per-ip/draft-fields",
		own: "echo-limiter/per-ip/x-ratelimit-fields", ownOurs: "echo5pace/per-ip/legacy-fields"},
	{name: "Fiber v2", dir: "adapters/fiberpace", bench: "BenchmarkFiber", floor: "noop-middleware", noFields: "fiberpace/per-ip/no-fields", draft: "fiberpace/per-ip/draft-fields",
		own: "fiber-limiter/per-ip/legacy-fields", ownOurs: "fiberpace/per-ip/legacy-fields"},
	{name: "Fiber v3", dir: "adapters/fiber3pace", bench: "BenchmarkFiber", floor: "noop-middleware", noFields: "fiber3pace/per-ip/no-fields", draft: "fiber3pace/per-ip/draft-fields",
		own: "fiber-limiter/per-ip/legacy-fields", ownOurs: "fiber3pace/per-ip/legacy-fields"},
	{name: "gRPC unary", dir: "adapters/grpcpace", bench: "BenchmarkUnaryServer", floor: "pass-through", noFields: "grpcpace/per-ip"},
}

// A sample is one benchmark line.
type sample struct{ ns, allocs float64 }

// part is one part's figure on an interleaved line (conformance.Interleave).
var part = regexp.MustCompile(`([\d.]+) (\S+)-ns/op`)

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+[\d.]+ B/op\s+([\d.]+) allocs/op)?`)

// A tree is one checkout's benchmark binaries and what they measured.
type tree struct {
	root    string
	bins    [][]string // per adapter, one per layout
	samples []map[string][]sample
}

func main() {
	root := flag.String("root", "..", "the repository's root")
	base := flag.String("base", "", "a second checkout (a git worktree of an earlier commit, say), measured in the same rounds for a before/after table")
	rounds := flag.Int("rounds", 5, "rounds; the table shows medians")
	benchtime := flag.String("benchtime", "400ms", "each benchmark's -test.benchtime")
	only := flag.String("only", "", "measure only the adapters whose name contains this")
	layouts := flag.Int("layouts", 1, "builds of each binary with its functions in a random order (-ldflags=-randlayout), the same orders for both trees, used in turn round by round; 1 is the linker's own order")
	flag.Parse()
	if *rounds < 1 || *layouts < 1 {
		fmt.Fprintln(os.Stderr, "-rounds and -layouts must be at least 1")
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "middlewarecost")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)

	var picked []adapter
	for _, a := range adapters {
		if strings.Contains(a.name, *only) {
			picked = append(picked, a)
		}
	}
	roots := []string{*root}
	if *base != "" {
		roots = []string{*base, *root}
	}
	trees := make([]*tree, len(roots))
	for t, r := range roots {
		tr := &tree{root: r, bins: make([][]string, len(picked)), samples: make([]map[string][]sample, len(picked))}
		for i, a := range picked {
			tr.samples[i] = map[string][]sample{}
			for l := range *layouts {
				bin := filepath.Join(tmp, fmt.Sprintf("%d-%d-%d.test", t, i, l))
				args := []string{"test", "-c", "-o", bin}
				if *layouts > 1 {
					args = append(args, fmt.Sprintf("-ldflags=-randlayout=%d", l+1))
				}
				build := exec.Command("go", append(args, ".")...)
				build.Dir = filepath.Join(r, a.dir)
				build.Env = append(os.Environ(), "GOWORK=off")
				if out, err := build.CombinedOutput(); err != nil {
					fail(fmt.Errorf("building %s in %s: %v\n%s", a.dir, r, err, out))
				}
				tr.bins[i] = append(tr.bins[i], bin)
			}
		}
		trees[t] = tr
	}

	// Each round runs every adapter in every tree, the trees one after the
	// other per adapter, so that a busy moment lands on both alike.
	for r := range *rounds {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", r+1, *rounds)
		for i, a := range picked {
			for _, tr := range trees {
				tr.run(i, a, *benchtime, r%*layouts)
			}
		}
	}

	fmt.Printf("medians of %d rounds of %s each", *rounds, *benchtime)
	if *layouts > 1 {
		fmt.Printf(", over %d random function orders in turn", *layouts)
	}
	fmt.Println()
	// The targets are this checkout's (the last tree): -base is only for
	// comparison.
	missed := 0
	for _, tr := range trees {
		if len(trees) > 1 {
			fmt.Printf("\n%s\n", tr.root)
		}
		missed = tr.table(picked)
	}
	if missed > 0 {
		fmt.Printf("\n%d targets missed (✗)\n", missed)
	}
}

// run runs adapter i's benchmarks once, in the binary of the given
// layout, and keeps their lines.
func (tr *tree) run(i int, a adapter, benchtime string, layout int) {
	run := exec.Command(tr.bins[i][layout], "-test.run", "^$", "-test.bench", "^"+a.bench+"$", "-test.benchtime", benchtime, "-test.benchmem")
	run.Dir = filepath.Join(tr.root, a.dir)
	out, err := run.CombinedOutput()
	if err != nil {
		fail(fmt.Errorf("%s: %v\n%s", a.dir, err, out))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), a.bench+"/interleaved") {
			for _, m := range part.FindAllStringSubmatch(sc.Text(), -1) {
				ns, _ := strconv.ParseFloat(m[1], 64)
				tr.samples[i]["@"+m[2]] = append(tr.samples[i]["@"+m[2]], sample{ns: ns})
			}
			continue
		}
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := strings.TrimPrefix(m[1], a.bench+"/")
		ns, _ := strconv.ParseFloat(m[2], 64)
		allocs, _ := strconv.ParseFloat(m[3], 64)
		tr.samples[i][name] = append(tr.samples[i][name], sample{ns, allocs})
	}
}

// table prints the tree's table and returns how many targets it missed.
// Where an adapter's benchmark has an interleaved row (every part batch
// by batch in turn), its ratios are the medians of each round's ratios
// of parts measured at the same moments; otherwise (an older tree) they
// come from the separate rows' medians.
func (tr *tree) table(picked []adapter) (missed int) {
	fmt.Printf("\n| adapter | floor | Take | per IP, no fields | added ÷ Take (≤ 1.3×) | draft fields add ÷ Take (≤ 0.5×) | of which the framework storing two fields | allocs, no fields / draft (0) | ours ÷ own limiter (≤ 0.8×) |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	mark := func(ok bool) string {
		if ok {
			return ""
		}
		missed++
		return " ✗"
	}
	for i, a := range picked {
		s := tr.samples[i]
		allocs := func(name string) float64 {
			if len(s[name]) == 0 {
				fail(fmt.Errorf("%s: no benchmark %s/%s", a.dir, a.bench, name))
			}
			return median(s[name], func(x sample) float64 { return x.allocs })
		}
		// fig is a part's median ns; ratio the median over rounds of f of
		// the parts' figures in each round.
		interleaved := len(s["@take"]) > 0
		fig := func(part, row string) float64 {
			if interleaved {
				return median(s["@"+part], func(x sample) float64 { return x.ns })
			}
			if len(s[row]) == 0 {
				fail(fmt.Errorf("%s: no benchmark %s/%s", a.dir, a.bench, row))
			}
			return median(s[row], func(x sample) float64 { return x.ns })
		}
		ratio := func(f func(at func(part, row string) float64) float64) float64 {
			if !interleaved {
				return f(fig)
			}
			var rs []sample
			for k := range s["@take"] {
				rs = append(rs, sample{ns: f(func(part, _ string) float64 { return s["@"+part][k].ns })})
			}
			return median(rs, func(x sample) float64 { return x.ns })
		}
		floor, take, ours := fig("floor", a.floor), fig("take", "take-same-key"), fig("no-fields", a.noFields)
		added := ratio(func(at func(part, row string) float64) float64 {
			return (at("no-fields", a.noFields) - at("floor", a.floor)) / at("take", "take-same-key")
		})
		floorAllocs := a.closureAllocs
		oursAllocs := allocs(a.noFields)
		draftCol, storeCol, allocCol := "off by default", "—", fmt.Sprintf("%.0f", oursAllocs-floorAllocs)
		allocOK := oursAllocs <= floorAllocs
		if a.draft != "" {
			d := ratio(func(at func(part, row string) float64) float64 {
				return (at("draft-fields", a.draft) - at("no-fields", a.noFields)) / at("take", "take-same-key")
			})
			draftCol = fmt.Sprintf("%.2f× (%.1f ns)%s", d, fig("draft-fields", a.draft)-ours, mark(d <= 0.5))
			// The fields-floor part (newer trees) is the floor storing
			// the same two fields as constants: the framework's own
			// share of the draft fields' cost, which no adapter avoids.
			if interleaved && len(s["@fields-floor"]) == len(s["@take"]) {
				f := ratio(func(at func(part, row string) float64) float64 {
					return (at("fields-floor", "") - at("floor", a.floor)) / at("take", "take-same-key")
				})
				storeCol = fmt.Sprintf("%.2f× (%.1f ns); ours beyond it %.2f×", f, fig("fields-floor", "")-floor, d-f)
			}
			draftAllocs := allocs(a.draft)
			allocCol += fmt.Sprintf(" / %.0f", draftAllocs-floorAllocs)
			allocOK = allocOK && draftAllocs <= floorAllocs
		}
		ownCol := "—"
		if a.own != "" {
			o := ratio(func(at func(part, row string) float64) float64 { return at("own-ours", a.ownOurs) / at("own", a.own) })
			ownCol = fmt.Sprintf("%.2f× (%.1f / %.1f ns)%s", o, fig("own-ours", a.ownOurs), fig("own", a.own), mark(o <= 0.8))
		}
		fmt.Printf("| %s | %.1f ns | %.1f ns | %.1f ns | %.2f× (%.1f ns)%s | %s | %s | %s%s | %s |\n",
			a.name, floor, take, ours, added, ours-floor, mark(added <= 1.3), draftCol, storeCol, allocCol, mark(allocOK), ownCol)
	}
	return missed
}

func median(xs []sample, f func(sample) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "middlewarecost:", err)
	os.Exit(1)
}
