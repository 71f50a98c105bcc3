package deploy

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"

	"gopkg.in/yaml.v3"
)

const chart = "helm/gopherpace"

// render renders the chart's templates as Helm does: its templates use
// only text/template's own functions, so text/template renders them as
// Helm's engine would (and TestChartRendersAsHelmDoes compares the two
// where helm is installed). set changes values before rendering.
func render(t *testing.T, set map[string]any) map[string][]map[string]any {
	t.Helper()
	var values map[string]any
	readYAML(t, filepath.Join(chart, "values.yaml"), &values)
	for k, v := range set {
		values[k] = v
	}
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": "gp", "Namespace": "default", "Service": "Helm"},
		"Chart":   map[string]any{"Name": "gopherpace", "Version": "0.1.0"},
	}
	files, err := filepath.Glob(filepath.Join(chart, "templates", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v %v", files, err)
	}
	var out bytes.Buffer
	for _, f := range files {
		tmpl, err := template.New(filepath.Base(f)).Option("missingkey=error").ParseFiles(f)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("\n---\n")
		if err := tmpl.Execute(&out, data); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return parseManifests(t, out.Bytes())
}

// parseManifests reads the documents of a rendered chart by kind.
func parseManifests(t *testing.T, text []byte) map[string][]map[string]any {
	t.Helper()
	byKind := map[string][]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("rendered YAML: %v\n%s", err, text)
		}
		if doc == nil {
			continue
		}
		kind, _ := doc["kind"].(string)
		byKind[kind] = append(byKind[kind], doc)
	}
	return byKind
}

// at reads a nested field: at(doc, "spec", "template", "spec").
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func envOf(container any) map[string]any {
	env := map[string]any{}
	for _, e := range at(container, "env").([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"]; ok {
			env[m["name"].(string)] = v
		} else {
			env[m["name"].(string)] = m["valueFrom"]
		}
	}
	return env
}

// The chart for gopherpace serve: what a cluster needs to survive its own
// operations, each checked in the rendered manifests.
func TestTheChartServesAClusterSafely(t *testing.T) {
	m := render(t, nil)
	for _, kind := range []string{"ConfigMap", "Service", "PodDisruptionBudget", "NetworkPolicy", "Deployment"} {
		if len(m[kind]) == 0 {
			t.Fatalf("no %s rendered", kind)
		}
	}
	dep := m["Deployment"][0]
	pod := at(dep, "spec", "template")
	labels := at(pod, "metadata", "labels")
	if !reflect.DeepEqual(at(m["PodDisruptionBudget"][0], "spec", "selector", "matchLabels"), labels) ||
		at(m["PodDisruptionBudget"][0], "spec", "maxUnavailable") != 1 {
		t.Errorf("the PodDisruptionBudget does not cover the pods one at a time: %v", m["PodDisruptionBudget"][0])
	}
	term := at(pod, "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0, "podAffinityTerm")
	if at(term, "topologyKey") != "kubernetes.io/hostname" || !reflect.DeepEqual(at(term, "labelSelector", "matchLabels"), labels) {
		t.Errorf("no anti-affinity spreading the replicas over nodes: %v", term)
	}
	var peers map[string]any
	for _, s := range m["Service"] {
		if at(s, "metadata", "name") == "gp-peers" {
			peers = s
		}
	}
	if at(peers, "spec", "clusterIP") != "None" || at(peers, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("the peers' Service must be headless and list pods before they are ready: %v", peers)
	}
	c := at(pod, "spec", "containers", 0)
	if at(c, "readinessProbe", "httpGet", "path") != "/readyz" || at(c, "livenessProbe", "httpGet", "path") != "/healthz" {
		t.Errorf("probes: %v %v", at(c, "readinessProbe"), at(c, "livenessProbe"))
	}
	env := envOf(c)
	for name, want := range map[string]any{
		"GOPHERPACE_SEEDS": "gp-peers:7946", "GOPHERPACE_PORT": "7946", "GOPHERPACE_ADDR": ":8100", "GOPHERPACE_GRPC_ADDR": ":8081", "GOPHERPACE_DRAIN": "5s",
	} {
		if env[name] != want {
			t.Errorf("%s = %v, want %v", name, env[name], want)
		}
	}
	if zone := at(env["GOPHERPACE_ZONE"], "fieldRef", "fieldPath"); zone != "metadata.labels['topology.kubernetes.io/zone']" {
		t.Errorf("the zone does not come from the pod's topology label: %v", zone)
	}
	if at(env["GOPHERPACE_SECRET_KEY"], "secretKeyRef", "name") != "gopherpace-gossip" {
		t.Errorf("the gossip key is not from the Secret: %v", env["GOPHERPACE_SECRET_KEY"])
	}
	var values map[string]any
	readYAML(t, filepath.Join(chart, "values.yaml"), &values)
	if got := at(m["ConfigMap"][0], "data", "limits.yaml"); got != values["limits"] {
		t.Errorf("the limits in the ConfigMap differ from the values':\n%v", got)
	}
	args := at(c, "args").([]any)
	if !slices.Contains(args, "/etc/gopherpace/limits.yaml") || at(c, "volumeMounts", 0, "mountPath") != "/etc/gopherpace" {
		t.Errorf("-config is not the mounted limits: %v", args)
	}
}

// The same chart for a service built with gopherpace (examples/server's
// variables), without limits or gRPC, and with replicas required apart.
func TestTheChartRunsAnApp(t *testing.T) {
	m := render(t, map[string]any{"app": true, "limits": "", "grpcPort": 0, "antiAffinity": "required",
		"args": []any{}, "extraEnv": []any{map[string]any{"name": "GOPHERPACE_RATE", "value": "100"}}})
	if len(m["ConfigMap"]) != 0 {
		t.Error("a ConfigMap of limits for an app that has none")
	}
	c := at(m["Deployment"][0], "spec", "template", "spec", "containers", 0)
	env := envOf(c)
	for name, want := range map[string]any{"GOPHERPACE_DNS": "gp-peers", "GOPHERPACE_GOSSIP_PORT": "7946", "GOPHERPACE_HTTP_ADDR": ":8100", "GOPHERPACE_RATE": "100"} {
		if env[name] != want {
			t.Errorf("%s = %v, want %v", name, env[name], want)
		}
	}
	if _, ok := env["GOPHERPACE_GRPC_ADDR"]; ok {
		t.Error("a gRPC address for an app without gRPC")
	}
	if at(m["Deployment"][0], "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", 0, "topologyKey") != "kubernetes.io/hostname" {
		t.Error("antiAffinity required is not required")
	}
	for _, p := range at(c, "ports").([]any) {
		if at(p, "name") == "grpc" {
			t.Error("a gRPC port for an app without gRPC")
		}
	}
}

// Where helm is installed (make helm), its own rendering and lint agree
// with the above.
func TestChartRendersAsHelmDoes(t *testing.T) {
	helm, err := exec.LookPath("helm")
	if err != nil {
		t.Skip("helm is not installed (make helm installs it from the Go module proxy): the chart was rendered by text/template only")
	}
	if out, err := exec.Command(helm, "lint", chart).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	out, err := exec.Command(helm, "template", "gp", chart).Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	theirs, ours := parseManifests(t, out), render(t, nil)
	// Helm reads numbers as float64 and yaml.v3 as int: compare as text.
	norm := func(v any) string { b, _ := yaml.Marshal(v); return strings.ReplaceAll(string(b), ".0\n", "\n") }
	if norm(theirs) != norm(ours) {
		t.Fatalf("helm renders differently:\n%s\nours:\n%s", norm(theirs), norm(ours))
	}
}
