package bench

import (
	"testing"
	"time"

	grate "github.com/pedreviljoen/gopherpace/core/rate"
	"golang.org/x/time/rate"
)

// rateAPIRows compare gopherpace's x/time/rate API (core/rate) with
// x/time/rate itself, call for call: the same limits, the same methods.
func rateAPIRows() []Row {
	type pair struct {
		ours, theirs func(limit) func() bool
	}
	allow := pair{
		ours: func(l limit) func() bool {
			if l == denyAll {
				return grate.NewLimiter(grate.Every(time.Hour), 1).Allow
			}
			return grate.NewLimiter(1e9, 1_000_000_000).Allow
		},
		theirs: func(l limit) func() bool {
			if l == denyAll {
				return rate.NewLimiter(rate.Every(time.Hour), 1).Allow
			}
			return rate.NewLimiter(1e9, 1_000_000_000).Allow
		},
	}
	reserve := pair{
		ours: func(limit) func() bool {
			lim := grate.NewLimiter(1e9, 1_000_000_000)
			return func() bool { return lim.ReserveN(time.Now(), 1).OK() }
		},
		theirs: func(limit) func() bool {
			lim := rate.NewLimiter(1e9, 1_000_000_000)
			return func() bool { return lim.ReserveN(time.Now(), 1).OK() }
		},
	}
	row := func(name string, p pair, l limit, parallel bool) Row {
		want := admitting
		if l == denyAll {
			want = denying
		}
		entry := func(who string, f func(limit) func() bool) Entry {
			return Entry{who, func(b *testing.B) { run(b, parallel, f(l), want) }}
		}
		return Row{Name: name, Ours: entry("gopherpace/core/rate", p.ours),
			Peers: []Entry{entry("x/time/rate", p.theirs)}}
	}
	return []Row{
		row("x/time/rate's API: Allow, admit, serial", allow, admitAll, false),
		row("x/time/rate's API: Allow, admit, parallel", allow, admitAll, true),
		row("x/time/rate's API: Allow, deny, serial", allow, denyAll, false),
		row("x/time/rate's API: ReserveN, serial", reserve, admitAll, false),
	}
}
