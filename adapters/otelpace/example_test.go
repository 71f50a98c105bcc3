package otelpace_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/otelpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Observe a limiter through an OpenTelemetry MeterProvider; any reader or
// exporter sees the decisions at its next collection.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	metrics, err := otelpace.New(provider.Meter("example"))
	if err != nil {
		log.Fatal(err)
	}
	defer metrics.Close()
	limiter, err := gopherpace.New(gopherpace.WithRate(2, time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	if err := metrics.Add("api", limiter); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		limiter.Allow()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "gopherpace.requests" {
			continue
		}
		for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
			decision, _ := p.Attributes.Value("decision")
			fmt.Println(decision.AsString(), p.Value)
		}
	}
	// Unordered output:
	// allowed 2
	// denied 1
	// shadowed 0
}
