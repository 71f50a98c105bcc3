// Package otelpace exports gopherpace limiters and transports as
// OpenTelemetry metrics: asynchronous instruments on a metric.Meter,
// observed from each limiter's Stats when the SDK collects, so the request
// path pays nothing beyond what the limiters count anyway. It is a module
// of its own, so that the core stays free of dependencies and only those
// who use OpenTelemetry download it.
//
//	m, err := otelpace.New(otel.Meter("github.com/you/service"))
//	m.Add("api", limiter)
//	m.AddTransport("memberlist", transport) // a *memberpace.Transport
//
// The instruments are named by OpenTelemetry's conventions (dotted names,
// UCUM units, no _total: exporters add what their format wants) and carry
// a limiter (or transport) attribute, never a key. docs/operations.md
// lists them beside prompace's Prometheus names; through the
// OpenTelemetry Prometheus exporter most come out with the same names.
package otelpace
