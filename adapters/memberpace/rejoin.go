package memberpace

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// rejoinLoop asks the seeds again and joins the peers that are missing,
// and the members declared dead that may only be cut off. memberlist never
// re-merges the two sides of a healed partition on its own; joining again
// is the established fix. It looks every second (±20%) and joins at once
// while this node is isolated or holds members dead without evidence that
// they are gone, otherwise every rejoin interval: a partition that starts
// in the middle of a long interval is not left to wait it out.
func (t *Transport) rejoinLoop(ctx context.Context) {
	defer t.rejoinDone.Done()
	// ±20% jitter, so that a fleet does not join in lockstep.
	jitter := func(d time.Duration) time.Duration {
		return d + time.Duration((rand.Float64()-0.5)*0.4*float64(d))
	}
	last, next := time.Now(), jitter(t.cfg.rejoin)
	for {
		timer := time.NewTimer(jitter(isolatedRejoinInterval))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		urgent := t.isolated() || len(t.departed.unreachable()) > 0
		if !urgent && time.Since(last) < next {
			continue
		}
		t.joinSeeds(ctx)
		last, next = time.Now(), jitter(t.cfg.rejoin)
	}
}

// isolated reports whether this node hears no peer: memberlist counts it
// alone, or no frame has come from any peer for two seconds.
func (t *Transport) isolated() bool {
	if t.ml.NumMembers() < 2 {
		return true
	}
	last := t.lastFrame.Load()
	return last == 0 || time.Since(time.Unix(0, last)) > 2*time.Second
}

// joinSeeds resolves the seeds and joins, concurrently and each within the
// join timeout, every one that is not a member this node has heard from in
// the last two seconds, and every member declared dead that is not known
// gone (departures.unreachable). A member that memberlist still lists (as suspect,
// say) but that sends nothing is joined again: after a partition heals, its
// side may hold this node dead, and the join's state exchange makes this
// node refute that.
func (t *Transport) joinSeeds(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.joinTimeout)
	defer cancel()
	addrs, err := t.cfg.seeds.Seeds(ctx)
	if err != nil {
		t.log.Warn("seeds unavailable; will retry", "node", t.name, "err", err)
		t.departed.recheck(nil)
	} else {
		t.departed.recheck(rosterOf(t.cfg.seeds, addrs))
	}
	seeded := len(addrs)
	for _, addr := range t.departed.unreachable() {
		if !slices.Contains(addrs, addr) {
			addrs = append(addrs, addr)
		}
	}
	present := map[string]bool{t.GossipAddr(): true}
	t.heardMu.Lock()
	for _, n := range t.ml.Members() {
		if time.Since(t.heard[n.Name]) < 2*time.Second {
			present[n.Address()] = true
		}
	}
	t.heardMu.Unlock()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		refusedBy = map[string]string{} // seeds that answered and refused
		joined    bool
	)
	for i, addr := range addrs {
		if present[addr] || ctx.Err() != nil {
			continue
		}
		wg.Go(func() {
			t.stats.joins.Add(1)
			// memberlist's Join takes no context; its TCP timeout is set to
			// the join timeout, which bounds it.
			_, err := t.ml.Join([]string{addr})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				joined = true
			case refusedJoin(err) && i < seeded:
				t.stats.joinErrors.Add(1)
				refusedBy[addr] = strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(err.Error(), "\n", " "), "\t", ""))
			default:
				t.stats.joinErrors.Add(1)
				t.log.Debug("join failed", "node", t.name, "seed", addr, "err", err)
			}
		})
	}
	wg.Wait()
	if err == nil {
		// Only the seeds' answers say whether the cluster refuses this node.
		t.refused.settle(t, refusedBy, joined || t.ml.NumMembers() > 1)
	}
}
