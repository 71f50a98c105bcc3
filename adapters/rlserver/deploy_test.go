package rlserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	ratelimitfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// yamlDocs reads every document of a YAML file as plain values.
func yamlDocs(t *testing.T, file string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		docs = append(docs, doc)
	}
}

// dig walks nested maps and lists: a string steps into a map, an int
// into a list.
func dig(v any, steps ...any) any {
	for _, s := range steps {
		switch s := s.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[s]
		case int:
			l, _ := v.([]any)
			if s >= len(l) {
				return nil
			}
			v = l[s]
		}
	}
	return v
}

// The Kubernetes manifest configures the server as written: its limits
// load, the container's args and environment (as the pod would get them)
// parse into a clustered server that listens where the probes and the
// Services look, and readiness is the endpoint that never follows peers.
func TestKubernetesManifestConfiguresTheServer(t *testing.T) {
	var limits string
	var container, podSpec, policy any
	services := map[string]any{}
	for _, doc := range yamlDocs(t, "deploy/kubernetes.yaml") {
		switch doc["kind"] {
		case "ConfigMap":
			limits, _ = dig(doc, "data", "limits.yaml").(string)
		case "Deployment":
			podSpec = dig(doc, "spec", "template", "spec")
			container = dig(podSpec, "containers", 0)
		case "Service":
			services[dig(doc, "metadata", "name").(string)] = doc
		case "NetworkPolicy":
			policy = doc
		}
	}
	if _, err := parseRLSConfig("limits.yaml", []byte(limits)); err != nil {
		t.Fatalf("the ConfigMap's limits: %v", err)
	}
	if container == nil {
		t.Fatal("no Deployment container")
	}
	stand := map[string]string{"metadata.name": "gopherpace-7d9-abcde", "status.podIP": "10.1.2.3"}
	env := map[string]string{}
	for _, e := range dig(container, "env").([]any) {
		name := dig(e, "name").(string)
		switch {
		case dig(e, "value") != nil:
			env[name] = dig(e, "value").(string)
		case dig(e, "valueFrom", "fieldRef") != nil:
			env[name] = stand[dig(e, "valueFrom", "fieldRef", "fieldPath").(string)]
		case dig(e, "valueFrom", "secretKeyRef") != nil:
			env[name] = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes, as openssl rand -base64 32 gives
		}
	}
	var args []string
	for _, a := range dig(container, "args").([]any) {
		args = append(args, a.(string))
	}
	c, err := ParseFlags(args, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("the container's flags and environment: %v", err)
	}
	if !c.Clustered() || c.BindAddr != "10.1.2.3" || c.NodeName != "gopherpace-7d9-abcde" || len(c.SecretKey) != 32 {
		t.Fatalf("not clustered as meant: %+v", c)
	}
	if mount := dig(container, "volumeMounts", 0, "mountPath"); mount != path.Dir(c.ConfigPath) {
		t.Fatalf("-config %s is not under the ConfigMap's mount %v", c.ConfigPath, mount)
	}
	if seed := c.Seeds[0]; !strings.HasPrefix(seed, "gopherpace-peers:") || dig(services["gopherpace-peers"], "spec", "publishNotReadyAddresses") != true {
		t.Fatalf("the seeds %v must name the peers' Service, which lists pods before they are ready", c.Seeds)
	}
	if p := dig(container, "readinessProbe", "httpGet"); dig(p, "path") != "/readyz" || ":"+itoa(dig(p, "port")) != c.Addr {
		t.Fatalf("readiness probe %v, server on %s", p, c.Addr)
	}
	if p := dig(container, "livenessProbe", "grpc", "port"); ":"+itoa(p) != c.GRPCAddr {
		t.Fatalf("liveness probe on %v, gRPC on %s", p, c.GRPCAddr)
	}
	probe := dig(container, "readinessProbe")
	noticed := time.Duration(dig(probe, "periodSeconds").(int)*dig(probe, "failureThreshold").(int)) * time.Second
	grace := time.Duration(dig(podSpec, "terminationGracePeriodSeconds").(int)) * time.Second
	if c.Drain <= noticed || c.Drain+shutdownTimeout >= grace {
		t.Fatalf("drain %v: it must outlast the readiness probe's %v and end with the shutdown (%v) within the grace period %v", c.Drain, noticed, shutdownTimeout, grace)
	}
	if dig(services["gopherpace"], "spec", "clusterIP") != "None" {
		t.Fatal("the callers' Service must be headless, so gRPC clients reach every replica")
	}
	checkNetworkPolicy(t, policy, c)
}

// checkNetworkPolicy checks that policy selects the server's pods and
// admits: to the gossip port, the replicas alone; to the gRPC and HTTP
// ports, the pods labelled gopherpace-caller (and, to HTTP, monitoring);
// to nothing else.
func checkNetworkPolicy(t *testing.T, policy any, c Config) {
	t.Helper()
	if policy == nil {
		t.Fatal("no NetworkPolicy: anyone in the cluster could reach the ports")
	}
	if dig(policy, "spec", "podSelector", "matchLabels", "app") != "gopherpace" || dig(policy, "spec", "policyTypes", 0) != "Ingress" {
		t.Fatalf("the NetworkPolicy does not govern the server's pods' ingress: %v", dig(policy, "spec"))
	}
	admitted := map[string][]string{} // port → who
	for _, rule := range dig(policy, "spec", "ingress").([]any) {
		var who []string
		for _, from := range dig(rule, "from").([]any) {
			switch {
			case dig(from, "podSelector", "matchLabels", "app") == "gopherpace":
				who = append(who, "replicas")
			case dig(from, "podSelector", "matchLabels", "gopherpace-caller") == "true":
				who = append(who, "callers")
			case dig(from, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name") == "monitoring":
				who = append(who, "monitoring")
			default:
				t.Fatalf("the NetworkPolicy admits %v", from)
			}
		}
		for _, p := range dig(rule, "ports").([]any) {
			port := itoa(dig(p, "port")) + "/" + dig(p, "protocol").(string)
			admitted[port] = append(admitted[port], who...)
		}
	}
	gossip := strconv.Itoa(c.BindPort)
	want := map[string]string{
		gossip + "/TCP": "replicas", gossip + "/UDP": "replicas",
		strings.TrimPrefix(c.GRPCAddr, ":") + "/TCP": "callers",
		strings.TrimPrefix(c.Addr, ":") + "/TCP":     "callers monitoring",
	}
	for port, who := range want {
		if got := strings.Join(admitted[port], " "); got != who {
			t.Errorf("port %s admits %q, want %q", port, got, who)
		}
	}
	if len(admitted) != len(want) {
		t.Errorf("the NetworkPolicy opens %v, want only %v", admitted, want)
	}
}

func itoa(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The Envoy bootstrap in deploy/envoy.yaml is a valid Envoy config (parsed
// into Envoy's own bootstrap message and checked by its generated
// validation; no live Envoy runs here), and it wires the ratelimit filter
// to a cluster of this server's gRPC port, for a domain the manifest's
// limits define.
func TestEnvoyBootstrapAsksThisServer(t *testing.T) {
	docs := yamlDocs(t, "deploy/envoy.yaml")
	if len(docs) != 1 {
		t.Fatalf("%d documents", len(docs))
	}
	js, err := json.Marshal(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("not an Envoy bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("Envoy would refuse it: %v", err)
	}
	var manager hcm.HttpConnectionManager
	if err := b.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&manager); err != nil {
		t.Fatal(err)
	}
	var filter *ratelimitfilter.RateLimit
	for _, f := range manager.HttpFilters {
		var rl ratelimitfilter.RateLimit
		if f.GetTypedConfig().UnmarshalTo(&rl) == nil {
			filter = &rl
		}
	}
	if filter == nil {
		t.Fatal("no ratelimit filter")
	}
	cluster := filter.RateLimitService.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if filter.RateLimitService.TransportApiVersion.String() != "V3" {
		t.Fatalf("transport API %v: this server speaks v3", filter.RateLimitService.TransportApiVersion)
	}
	var limits string
	for _, doc := range yamlDocs(t, "deploy/kubernetes.yaml") {
		if doc["kind"] == "ConfigMap" {
			limits, _ = dig(doc, "data", "limits.yaml").(string)
		}
	}
	cfg, err := parseRLSConfig("limits.yaml", []byte(limits))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.domains[filter.Domain] == nil {
		t.Fatalf("Envoy asks for domain %q, which the limits do not define", filter.Domain)
	}
	for _, c := range b.StaticResources.Clusters {
		if c.Name != cluster {
			continue
		}
		addr := c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress()
		if addr.GetPortValue() != 8081 || addr.Address != "gopherpace" {
			t.Fatalf("cluster %s points at %s:%d, not the gopherpace Service's gRPC port", cluster, addr.Address, addr.GetPortValue())
		}
		if c.TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] == nil {
			t.Fatal("gRPC needs HTTP/2 to the cluster")
		}
		return
	}
	t.Fatalf("no cluster %q", cluster)
}
