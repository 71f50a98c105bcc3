package readme

import "github.com/pedreviljoen/gopherpace/core/status"

import (
	"log"
	"net/http"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	"github.com/pedreviljoen/gopherpace/adapters/otelpace"
	"github.com/pedreviljoen/gopherpace/adapters/prompace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
)

// Operating is README.md: health, the status page.
func Operating(mux *http.ServeMux, limiter *gopherpace.Limiter) {
	mux.Handle("/readyz", status.Ready(limiter))               // readiness: 503 once closed, or refused by the cluster
	mux.Handle("/cluster", status.Health(limiter))             // for alerts: 503 naming the peers out of sight
	mux.Handle("/status", status.NewPage("checkout", limiter)) // a live page of this node's view
}

// ReadmePrometheus is README.md: Prometheus.
func ReadmePrometheus(limiter *gopherpace.Limiter, transport *memberpace.Transport) {
	metrics := prompace.New()
	metrics.Add("api", limiter) // gopherpace_requests_total{limiter="api",decision="allowed"} ...
	metrics.AddTransport("memberlist", transport)
	prometheus.MustRegister(metrics)
}

// ReadmeOpenTelemetry is README.md: OpenTelemetry.
func ReadmeOpenTelemetry(limiter *gopherpace.Limiter) {
	metrics, err := otelpace.New(otel.Meter("github.com/you/service"))
	if err != nil {
		log.Fatal(err)
	}
	metrics.Add("api", limiter) // gopherpace.requests{limiter="api",decision="allowed"} ...
}

// OperationsPrometheus is docs/operations.md: Prometheus.
func OperationsPrometheus(apiLimiter, loginLimiter *gopherpace.Limiter, transport *memberpace.Transport) {
	metrics := prompace.New()
	metrics.Add("api", apiLimiter) // label limiter="api"
	metrics.Add("login", loginLimiter)
	metrics.AddTransport("memberlist", transport)
	prometheus.MustRegister(metrics)
}

// OperationsOpenTelemetry is docs/operations.md: OpenTelemetry.
func OperationsOpenTelemetry(apiLimiter *gopherpace.Limiter, transport *memberpace.Transport) {
	metrics, err := otelpace.New(otel.Meter("github.com/you/service"))
	if err != nil {
		log.Fatal(err)
	}
	metrics.Add("api", apiLimiter) // attribute limiter="api"
	metrics.AddTransport("memberlist", transport)
	defer metrics.Close()
}
