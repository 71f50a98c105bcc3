package bench

import (
	"flag"
	"strings"
	"testing"
)

// BenchmarkRows runs every row as sub-benchmarks named <row>/<contender>.
func BenchmarkRows(b *testing.B) {
	for _, row := range Rows() {
		for _, e := range append([]Entry{row.Ours}, row.Peers...) {
			b.Run(row.Name+"/"+e.Name, e.Bench)
		}
		if row.Release != nil {
			row.Release()
		}
	}
}

// Every entry of every row but the 1M-key one runs and measures the path
// it names (run and keyedRun fail a benchmark otherwise), however short.
func TestEveryRowRuns(t *testing.T) {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1s" {
		f.Value.Set("10ms") // the paths, not the speeds, are under test
		defer f.Value.Set("1s")
	}
	for _, row := range Rows() {
		if strings.Contains(row.Name, "1M") {
			continue
		}
		for _, e := range append([]Entry{row.Ours}, row.Peers...) {
			if res := testing.Benchmark(e.Bench); res.N == 0 {
				t.Errorf("%s: %s failed", row.Name, e.Name)
			}
		}
		if row.Release != nil {
			row.Release()
		}
	}
}

func TestBytesPerKeySmall(t *testing.T) {
	sizes, err := BytesPerKey(10_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 5 || sizes[0].Name != "gopherpace" {
		t.Fatalf("want gopherpace and four keyed peers, got %v", sizes)
	}
	for _, s := range sizes {
		if s.Bytes <= 0 {
			t.Errorf("nonsense measurement: %s %.1f bytes/key", s.Name, s.Bytes)
		}
	}
}
