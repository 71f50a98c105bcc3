package bench

import (
	"fmt"
	"sync"
	"testing"
)

// A Row is one line of the table: gopherpace and each peer on the same
// work, measured in turn in the same run.
type Row struct {
	Name  string
	Ours  Entry
	Peers []Entry
	// Target is the largest acceptable ns/op ratio of ours to the fastest
	// peer (or, with Added, the largest ns added); 0 for none.
	Target float64
	// Added reports ours − peer in ns/op, for overhead over a baseline.
	Added bool
	// Release frees the row's fixtures once its rounds are done.
	Release func()
}

// An Entry is one side of a row.
type Entry struct {
	Name  string
	Bench func(*testing.B)
}

// Rows lists the comparisons in table order. Fixtures are built on first
// use and held until the row's Release.
func Rows() []Row {
	cs := contenders()
	rows := []Row{
		singleRow("one bucket, admit, serial", cs, admitAll, false, 0.5),
		singleRow("one bucket, admit, parallel", cs, admitAll, true, 0.5),
		singleRow("one bucket, deny, serial", cs, denyAll, false, 0),
		singleRow("one bucket, deny, parallel", cs, denyAll, true, 0),
		keyedRow("keyed, 1k keys, parallel", cs, 1_000, 0),
		keyedRow("keyed, 1M keys, parallel", cs, 1_000_000, 0.7),
	}
	rows = append(rows, rateAPIRows()...)
	return append(append(rows, clusteredRows()...), middlewareRow())
}

func singleRow(name string, cs []contender, l limit, parallel bool, target float64) Row {
	want := admitting
	if l == denyAll {
		want = denying
	}
	entry := func(c contender) Entry {
		return Entry{c.name, func(b *testing.B) {
			allow, err := c.allow(l)
			if err != nil {
				b.Fatal(err)
			}
			run(b, parallel, allow, want)
		}}
	}
	row := Row{Name: name, Ours: entry(cs[0]), Target: target}
	for _, c := range cs[1:] {
		if f, _ := c.allow(l); f != nil {
			row.Peers = append(row.Peers, entry(c))
		}
	}
	return row
}

func keyedRow(name string, cs []contender, n int, target float64) Row {
	var fixtures []*keyedFixture
	entry := func(c contender) Entry {
		f := &keyedFixture{c: c, n: n}
		fixtures = append(fixtures, f)
		return Entry{c.name, f.bench}
	}
	row := Row{Name: name, Ours: entry(cs[0]), Target: target}
	for _, c := range cs[1:] {
		if c.take != nil {
			row.Peers = append(row.Peers, entry(c))
		}
	}
	row.Release = func() {
		for _, f := range fixtures {
			f.release()
		}
	}
	return row
}

// A keyedFixture is a store holding n live keys, filled once, before the
// first timed run.
type keyedFixture struct {
	c    contender
	n    int
	once sync.Once
	take func(string) bool
	err  error
}

func (f *keyedFixture) bench(b *testing.B) {
	f.once.Do(func() {
		f.take, f.err = f.c.take(keepLive, f.n)
		for i := 0; f.err == nil && i < f.n; i++ {
			if !f.take(key(i)) {
				f.err = fmt.Errorf("%s denied key %d while filling", f.c.name, i)
			}
		}
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
	keyedRun(b, f.n, f.take)
	if f.c.live != nil {
		if got := f.c.live(); got != int64(f.n) {
			b.Fatalf("%s holds %d live keys after the run, want %d", f.c.name, got, f.n)
		}
	}
}

func (f *keyedFixture) release() { f.take = nil }
