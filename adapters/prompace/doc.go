// Package prompace exports gopherpace limiters and transports as
// Prometheus metrics: a prometheus.Collector that reads each limiter's
// Stats on every scrape. It is a module of its own, so that the core stays
// free of dependencies and only those who use Prometheus download it.
//
//	c := prompace.New()
//	c.Add("api", limiter)
//	c.AddTransport("memberlist", transport) // a *memberpace.Transport
//	prometheus.MustRegister(c)
//
// Metrics carry a limiter (or transport) label, never a key: a series per
// client would grow without bound. docs/operations.md lists the metrics
// and the alerts worth setting on them.
package prompace
