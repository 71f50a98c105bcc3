package readme

import (
	"context"
	"net/http"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/rate"
)

// Budget is README.md: 100,000 LLM tokens an hour per API key.
func Budget() (*gopherpace.Limiter, error) {
	return gopherpace.New(gopherpace.WithRate(100_000, time.Hour))
}

// UsageAfterTheFact is README.md: a cost known only after the response.
func UsageAfterTheFact(budget *gopherpace.Limiter, w http.ResponseWriter, apiKey string, complete func() int64) {
	if !budget.Peek(apiKey).Allowed { // empty, or in debt
		http.Error(w, "token budget spent", http.StatusTooManyRequests)
		return
	}
	used := complete()          // generate the answer, counting its tokens
	budget.Charge(apiKey, used) // may go into debt, repaid by refill
}

// XTimeRate is README.md: x/time/rate's API, cluster-wide by one option.
func XTimeRate(ctx context.Context, transport gopherpace.Transport) error {
	lim := rate.NewLimiter(rate.Every(100*time.Millisecond), 5,
		rate.Clustered(transport, gopherpace.WithLimiterID("github-api")))
	defer lim.Close()
	return lim.Wait(ctx)
}

// InFlightCap is README.md: requests in flight, capped across the cluster.
func InFlightCap(ctx context.Context, payments *gopherpace.InFlight, call func() error) error {
	release, err := payments.Acquire(ctx, "") // waits for a slot
	if err != nil {
		return err
	}
	defer release()
	return call()
}
