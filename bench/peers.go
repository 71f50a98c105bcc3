package bench

import (
	"context"
	"sync"
	"time"

	juju "github.com/juju/ratelimit"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

// A limit is how a fixture is configured, in each library's nearest form.
type limit int

const (
	// admitAll: 1e9 a second with a bucket of 1e9, so no run empties it.
	admitAll limit = iota
	// denyAll: 1 an hour with a bucket of 1, so the first call spends it
	// and no run, however slow, sees it refill.
	denyAll
	// keepLive: 1 every 10 minutes with a bucket of 1e6, so every call of
	// a run is admitted and a bucket once spent from stays short of full
	// (live) for the row: none refills into a sweep.
	keepLive
)

var ctx = context.Background()

// A contender is one library's limiter. allow answers for one bucket; nil
// means the library cannot answer under that limit (go.uber.org/ratelimit
// waits instead of denying, and has no keys). take answers for a key.
type contender struct {
	name  string
	allow func(limit) (func() bool, error)
	take  func(limit, int) (func(string) bool, error) // int: the keys expected
	// live, where the library can tell, counts the keys its last keyed
	// store holds: a fixture checks that none was swept.
	live func() int64
}

func ours() contender {
	build := func(l limit, keys int) (*gopherpace.Limiter, error) {
		opts := map[limit][]gopherpace.Option{
			admitAll: {gopherpace.WithRate(1_000_000_000, time.Second), gopherpace.WithBucketSize(1_000_000_000)},
			denyAll:  {gopherpace.WithRate(1, time.Hour), gopherpace.WithBucketSize(1)},
			keepLive: {gopherpace.WithRate(1, 10*time.Minute), gopherpace.WithBucketSize(1_000_000)},
		}[l]
		if keys > 0 {
			opts = append(opts, gopherpace.WithMaxKeys(int64(keys)+1))
		}
		return gopherpace.New(opts...)
	}
	var last *gopherpace.Limiter
	return contender{name: "gopherpace",
		allow: func(l limit) (func() bool, error) {
			lim, err := build(l, 0)
			if err != nil {
				return nil, err
			}
			return func() bool { ok, _ := lim.Allow(); return ok }, nil
		},
		take: func(l limit, keys int) (func(string) bool, error) {
			lim, err := build(l, keys)
			if err != nil {
				return nil, err
			}
			last = lim
			return func(k string) bool { d, err := lim.Take(k, 1); return err == nil && d.Allowed }, nil
		},
		live: func() int64 { return last.Stats().LiveKeys },
	}
}

func xTimeRate() contender {
	build := func(l limit) *rate.Limiter {
		switch l {
		case denyAll:
			return rate.NewLimiter(rate.Every(time.Hour), 1)
		case keepLive:
			return rate.NewLimiter(rate.Every(10*time.Minute), 1_000_000)
		}
		return rate.NewLimiter(1e9, 1_000_000_000)
	}
	return contender{name: "x/time/rate",
		allow: func(l limit) (func() bool, error) { return build(l).Allow, nil },
		// The usual keyed form: a sync.Map of limiters, LoadOrStore on a miss.
		take: func(l limit, _ int) (func(string) bool, error) {
			var m sync.Map
			return func(k string) bool {
				v, ok := m.Load(k)
				if !ok {
					v, _ = m.LoadOrStore(k, build(l))
				}
				return v.(*rate.Limiter).Allow()
			}, nil
		},
	}
}

func uberRatelimit() contender {
	return contender{name: "uber ratelimit",
		allow: func(l limit) (func() bool, error) {
			if l != admitAll {
				return nil, nil
			}
			lim := uber.New(1_000_000_000) // 1 ns apart: Take never sleeps
			return func() bool { lim.Take(); return true }, nil
		},
	}
}

func jujuRatelimit() contender {
	return contender{name: "juju ratelimit",
		allow: func(l limit) (func() bool, error) {
			b := juju.NewBucketWithRate(1e9, 1_000_000_000)
			if l == denyAll {
				b = juju.NewBucketWithRate(1.0/3600, 1)
			}
			return func() bool { return b.TakeAvailable(1) == 1 }, nil
		},
	}
}

// throttled's GCRA over its map store (no LRU).
func throttledGCRA() contender {
	take := func(l limit, _ int) (func(string) bool, error) {
		st, err := memstore.NewCtx(0)
		if err != nil {
			return nil, err
		}
		q := map[limit]throttled.RateQuota{
			admitAll: {MaxRate: throttled.PerSec(1_000_000_000), MaxBurst: 1_000_000_000},
			denyAll:  {MaxRate: throttled.PerHour(1), MaxBurst: 0}, // one call, then none
			keepLive: {MaxRate: throttled.PerHour(6), MaxBurst: 1_000_000},
		}[l]
		lim, err := throttled.NewGCRARateLimiterCtx(st, q)
		if err != nil {
			return nil, err
		}
		// Its default of 10 compare-and-swap attempts fails calls on one
		// key from two cores at once; a user under contention raises it.
		lim.SetMaxCASAttemptsLimit(1 << 20)
		return func(k string) bool {
			limited, _, err := lim.RateLimitCtx(ctx, k, 1)
			return err == nil && !limited
		}, nil
	}
	return contender{name: "throttled GCRA", allow: oneKey(take), take: take}
}

// sethvargo/go-limiter's memorystore: its buckets refill all their tokens
// once an interval.
func sethvargoLimiter() contender {
	take := func(l limit, _ int) (func(string) bool, error) {
		c := map[limit]*memorystore.Config{
			// An hour, not a second: its refill adds interval/tokens
			// tokens an interval, which is 1 at 1e9 a second; a fresh
			// store starts with all 1e9.
			admitAll: {Tokens: 1_000_000_000, Interval: time.Hour},
			denyAll:  {Tokens: 1, Interval: time.Hour},
			keepLive: {Tokens: 1_000_000, Interval: 10 * time.Minute},
		}[l]
		st, err := memorystore.New(c)
		if err != nil {
			return nil, err
		}
		return func(k string) bool {
			_, _, _, ok, err := st.Take(ctx, k)
			return err == nil && ok
		}, nil
	}
	return contender{name: "sethvargo", allow: oneKey(take), take: take}
}

// ulule/limiter's memory store: a fixed window per key.
func ululeLimiter() contender {
	take := func(l limit, _ int) (func(string) bool, error) {
		r := map[limit]ulule.Rate{
			admitAll: {Period: time.Second, Limit: 1_000_000_000},
			denyAll:  {Period: time.Hour, Limit: 1},
			keepLive: {Period: 10 * time.Minute, Limit: 1_000_000},
		}[l]
		lim := ulule.New(ululememory.NewStore(), r)
		return func(k string) bool {
			c, err := lim.Get(ctx, k)
			return err == nil && !c.Reached
		}, nil
	}
	return contender{name: "ulule", allow: oneKey(take), take: take}
}

// oneKey is a keyed store used as one bucket, the way these libraries
// limit a whole service.
func oneKey(take func(limit, int) (func(string) bool, error)) func(limit) (func() bool, error) {
	return func(l limit) (func() bool, error) {
		f, err := take(l, 1)
		if err != nil {
			return nil, err
		}
		return func() bool { return f("k") }, nil
	}
}

// contenders are gopherpace and its peers, in table order.
func contenders() []contender {
	return []contender{ours(), xTimeRate(), uberRatelimit(), jujuRatelimit(), throttledGCRA(), sethvargoLimiter(), ululeLimiter()}
}
