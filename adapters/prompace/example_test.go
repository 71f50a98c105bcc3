package prompace_test

import (
	"log"
	"net/http"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/prompace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Export a limiter's decisions at /metrics.
func Example() {
	limiter, err := gopherpace.New(gopherpace.WithRate(100, time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	c := prompace.New()
	if err := c.Add("api", limiter); err != nil {
		log.Fatal(err)
	}
	prometheus.MustRegister(c)
	http.Handle("/metrics", promhttp.Handler())
	// gopherpace_requests_total{decision="allowed",limiter="api"} 0 ...
}
