// Package deploy holds what operators install beside gopherpace, checked
// by its tests: a Grafana dashboard (grafana/gopherpace.json) and
// Prometheus alert rules with a promtool test case for each
// (prometheus/alerts.yaml, prometheus/alerts_test.yaml). Every metric and
// label they read is in the output of both exporters, prompace's and
// otelpace's through the OpenTelemetry Prometheus exporter.
package deploy
