// Command middlewarecost measures what each framework adapter adds to a
// request, against the floors in the same benchmark binary, and prints one
// table with the targets of docs/performance.md#middleware:
//
//   - added: the adapter per client IP with no fields, less the framework's
//     own cost of any middleware (a no-op middleware, the bare handler for
//     net/http, a pass-through interceptor for gRPC), as a multiple of a
//     bare Take of the same key (target ≤ 1.3×);
//   - draft: what the draft fields add over no fields, as a multiple of
//     the same Take (target ≤ 0.5×);
//   - own: the adapter against the framework's own limiter, like for like
//     (same fields, same key), where the framework has one (target ≤ 0.8×);
//   - allocations on the admit path (target 0, Echo v4's per-request
//     closure aside, which its no-op middleware pays too).
//
// It builds each adapter's test binary once and runs them in turn, round
// after round, so that a busy moment of the shared machine lands on every
// adapter alike; the table shows medians over the rounds. Run it from the
// bench directory (make bench does).
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

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+[\d.]+ B/op\s+([\d.]+) allocs/op)?`)

func main() {
	root := flag.String("root", "..", "the repository's root")
	rounds := flag.Int("rounds", 5, "rounds; the table shows medians")
	benchtime := flag.String("benchtime", "400ms", "each benchmark's -test.benchtime")
	only := flag.String("only", "", "measure only the adapters whose name contains this")
	flag.Parse()
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "-rounds must be at least 1")
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
	bins := make([]string, len(picked))
	for i, a := range picked {
		bins[i] = filepath.Join(tmp, strconv.Itoa(i)+".test")
		build := exec.Command("go", "test", "-c", "-o", bins[i], ".")
		build.Dir = filepath.Join(*root, a.dir)
		build.Env = append(os.Environ(), "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			fail(fmt.Errorf("building %s: %v\n%s", a.dir, err, out))
		}
	}

	samples := make([]map[string][]sample, len(picked))
	for i := range samples {
		samples[i] = map[string][]sample{}
	}
	for r := range *rounds {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", r+1, *rounds)
		for i, a := range picked {
			run := exec.Command(bins[i], "-test.run", "^$", "-test.bench", "^"+a.bench+"$", "-test.benchtime", *benchtime, "-test.benchmem")
			run.Dir = filepath.Join(*root, a.dir)
			out, err := run.CombinedOutput()
			if err != nil {
				fail(fmt.Errorf("%s: %v\n%s", a.dir, err, out))
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				m := line.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				name := strings.TrimPrefix(m[1], a.bench+"/")
				ns, _ := strconv.ParseFloat(m[2], 64)
				allocs, _ := strconv.ParseFloat(m[3], 64)
				samples[i][name] = append(samples[i][name], sample{ns, allocs})
			}
		}
	}

	fmt.Printf("medians of %d rounds of %s each\n\n", *rounds, *benchtime)
	fmt.Printf("| adapter | floor | Take | per IP, no fields | added ÷ Take (≤ 1.3×) | draft fields add ÷ Take (≤ 0.5×) | allocs, no fields / draft (0) | ours ÷ own limiter (≤ 0.8×) |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|\n")
	missed := 0
	for i, a := range picked {
		s := samples[i]
		med := func(name string) (float64, float64) {
			ns, allocs := median(s[name], func(x sample) float64 { return x.ns }), median(s[name], func(x sample) float64 { return x.allocs })
			if ns == 0 {
				fail(fmt.Errorf("%s: no benchmark %s/%s", a.dir, a.bench, name))
			}
			return ns, allocs
		}
		floor, _ := med(a.floor)
		floorAllocs := a.closureAllocs
		take, _ := med("take-same-key")
		ours, oursAllocs := med(a.noFields)
		added := (ours - floor) / take
		mark := func(ok bool) string {
			if ok {
				return ""
			}
			missed++
			return " ✗"
		}
		draftCol, allocCol := "off by default", fmt.Sprintf("%.0f", oursAllocs-floorAllocs)
		allocOK := oursAllocs <= floorAllocs
		if a.draft != "" {
			draft, draftAllocs := med(a.draft)
			d := (draft - ours) / take
			draftCol = fmt.Sprintf("%.2f× (%.1f ns)%s", d, draft-ours, mark(d <= 0.5))
			allocCol += fmt.Sprintf(" / %.0f", draftAllocs-floorAllocs)
			allocOK = allocOK && draftAllocs <= floorAllocs
		}
		ownCol := "—"
		if a.own != "" {
			own, _ := med(a.own)
			theirs, _ := med(a.ownOurs)
			o := theirs / own
			ownCol = fmt.Sprintf("%.2f× (%.1f / %.1f ns)%s", o, theirs, own, mark(o <= 0.8))
		}
		fmt.Printf("| %s | %.1f ns | %.1f ns | %.1f ns | %.2f× (%.1f ns)%s | %s | %s%s | %s |\n",
			a.name, floor, take, ours, added, ours-floor, mark(added <= 1.3), draftCol, allocCol, mark(allocOK), ownCol)
	}
	if missed > 0 {
		fmt.Printf("\n%d targets missed (✗)\n", missed)
	}
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
