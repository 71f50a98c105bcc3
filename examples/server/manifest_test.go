package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// Every manifest under examples/ must configure this server as written:
// each container's environment, expanded as Kubernetes expands it, loads
// without error, and no $(VAR) reference is left unexpanded. Kubernetes
// expands a reference only from variables listed before it and leaves the
// rest as they are, which once made every pod of the example run alone.
func TestManifestsConfigureTheServer(t *testing.T) {
	var manifests []string
	filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			manifests = append(manifests, path)
		}
		return err
	})
	if len(manifests) == 0 {
		t.Fatal("no manifests found under examples/")
	}
	containers := 0
	for _, path := range manifests {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Name string
								Env  []struct {
									Name      string
									Value     string
									ValueFrom map[string]any `yaml:"valueFrom"`
								}
							}
						}
					}
				}
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, c := range doc.Spec.Template.Spec.Containers {
				containers++
				env := map[string]string{}
				for _, e := range c.Env {
					v := e.Value
					if e.ValueFrom != nil {
						v = "from-" + strings.ToLower(e.Name) // a pod field or a secret, known at run time
						if e.Name == "GOPHERPACE_SECRET_KEY" {
							v = "MDEyMzQ1Njc4OWFiY2RlZg==" // 16 bytes
						}
					}
					env[e.Name] = expand(v, env)
					if ref := reference.FindString(env[e.Name]); ref != "" {
						t.Errorf("%s: container %s: %s refers to %s before it is defined; Kubernetes leaves it unexpanded",
							path, c.Name, e.Name, ref)
					}
				}
				if _, err := loadConfig(func(k string) string { return env[k] }); err != nil {
					t.Errorf("%s: container %s: the server rejects its environment: %v", path, c.Name, err)
				}
			}
		}
	}
	if containers == 0 {
		t.Fatal("no containers found in the manifests")
	}
}

var reference = regexp.MustCompile(`\$\([A-Za-z_][A-Za-z0-9_]*\)`)

// expand replaces $(VAR) with the value of a variable defined so far, as
// Kubernetes does; others stay as they are.
func expand(v string, env map[string]string) string {
	return reference.ReplaceAllStringFunc(v, func(ref string) string {
		if val, ok := env[ref[2:len(ref)-1]]; ok {
			return val
		}
		return ref
	})
}

// The Kubernetes example admits only its replicas to the gossip port,
// and leaves the HTTP port, the service itself, open.
func TestManifestKeepsGossipPrivate(t *testing.T) {
	data, err := os.ReadFile("../kubernetes/gopherpace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Kind string
			Spec struct {
				PodSelector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"podSelector"`
				Ingress []struct {
					From []struct {
						PodSelector *struct {
							MatchLabels map[string]string `yaml:"matchLabels"`
						} `yaml:"podSelector"`
					}
					Ports []struct {
						Port     int
						Protocol string
					}
				}
			}
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc.Kind != "NetworkPolicy" {
			continue
		}
		app := doc.Spec.PodSelector.MatchLabels["app"]
		open := map[int]string{}
		for _, rule := range doc.Spec.Ingress {
			who := "anyone"
			if len(rule.From) > 0 {
				who = ""
				for _, f := range rule.From {
					if f.PodSelector == nil || f.PodSelector.MatchLabels["app"] != app {
						t.Fatalf("the policy admits %+v", f)
					}
					who = "replicas"
				}
			}
			for _, p := range rule.Ports {
				open[p.Port] = who
			}
		}
		if app != "gopherpace-demo" || open[7946] != "replicas" || open[8080] != "anyone" || len(open) != 2 {
			t.Fatalf("policy for %q opens %v, want gossip (7946) to the replicas and HTTP (8080) to anyone", app, open)
		}
		return
	}
	t.Fatal("no NetworkPolicy in the Kubernetes example")
}
