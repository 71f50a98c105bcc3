package release

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// The repository as a user meets it once published: every library module
// zipped at a release version into a file-system module proxy, as a tag
// would publish it, and fresh modules outside the repository, with no
// replace and no go.work, that run the README's go get lines verbatim and
// build the Quickstart, a Fiber program, and a gRPC server limited over a
// memberlist cluster. Modules from elsewhere come from the module cache
// this machine already holds, so the test does not reach the network for
// what the repository's own builds fetched.

const testVersion = "v0.9.0"

var repoRoot = filepath.Join("..", "..")

// TestGoGetAsAUser checks the release step: with the siblings required at
// the version released, go get of core plus one adapter resolves; without
// it (the requires at v0.0.0, as in development), it does not.
func TestGoGetAsAUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs from a module proxy")
	}
	mods, err := Find(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("without the release step go get fails", func(t *testing.T) {
		env := proxyEnv(t, buildProxy(t, mods, false))
		app := newConsumer(t, env)
		out, err := goCmd(app, env, "get", Prefix+"adapters/fiberpace@"+testVersion)
		if err == nil {
			t.Fatalf("go get of fiberpace resolved with its siblings required at v0.0.0:\n%s", out)
		}
		if !strings.Contains(out, "v0.0.0") {
			t.Fatalf("go get failed, but not on the v0.0.0 requires:\n%s", out)
		}
	})
	env := proxyEnv(t, buildProxy(t, mods, true))

	t.Run("the README's go get lines and its Quickstart", func(t *testing.T) {
		app := newConsumer(t, env)
		lines := goGetLines(t, "README.md", filepath.Join("docs", "adapters.md"))
		if len(lines) < 3 {
			t.Fatalf("found %d go get lines in the README and docs/adapters.md", len(lines))
		}
		for _, line := range lines {
			mustGo(t, app, env, strings.Fields(line)[1:]...)
		}
		writeMain(t, app, quickstart(t))
		mustGo(t, app, env, "build", "-o", os.DevNull, ".")
	})

	t.Run("core and Fiber pull no other framework", func(t *testing.T) {
		app := newConsumer(t, env)
		mustGo(t, app, env, "get", Prefix+"core", Prefix+"adapters/fiberpace")
		writeMain(t, app, fiberProgram)
		mustGo(t, app, env, "build", "-o", os.DevNull, ".")
		deps := mustGo(t, app, env, "list", "-deps", ".")
		for _, other := range []string{"github.com/gin-gonic/", "github.com/labstack/echo", "google.golang.org/grpc", "github.com/hashicorp/memberlist", "github.com/prometheus/", Prefix + "adapters/ginpace"} {
			if strings.Contains(deps, other) {
				t.Errorf("core plus fiberpace pulls %s", other)
			}
		}
		if !strings.Contains(deps, "github.com/gofiber/fiber/v2") {
			t.Errorf("go list -deps does not list Fiber:\n%s", deps)
		}
	})

	t.Run("go install of the service's command, as the README says", func(t *testing.T) {
		line := goInstallLine(t, "README.md")
		bin := t.TempDir()
		mustGo(t, t.TempDir(), append(env, "GOBIN="+bin), strings.Fields(strings.Replace(line, "@latest", "@"+testVersion, 1))[1:]...)
		out, err := exec.Command(filepath.Join(bin, "gopherpace"), "serve", "-h").CombinedOutput()
		if !strings.Contains(string(out), "-rate") {
			t.Fatalf("the installed gopherpace serve -h: %v\n%s", err, out)
		}
	})

	t.Run("a gRPC server limited over a memberlist cluster", func(t *testing.T) {
		app := newConsumer(t, env)
		mustGo(t, app, env, "get", Prefix+"core", Prefix+"adapters/grpcpace", Prefix+"adapters/memberpace", Prefix+"seeds")
		writeMain(t, app, grpcProgram)
		mustGo(t, app, env, "build", "-o", os.DevNull, ".")
	})
}

// buildProxy zips every library module at testVersion into a new
// file-system proxy, with the siblings' requires set to that version when
// released is true.
func buildProxy(t *testing.T, mods []Module, released bool) string {
	t.Helper()
	tree := t.TempDir()
	var published []Module
	for _, m := range mods {
		if m.Publish {
			copyTracked(t, m.Dir, tree)
			published = append(published, m)
		}
	}
	if released {
		if _, err := SetVersion(tree, published, testVersion); err != nil {
			t.Fatal(err)
		}
	}
	proxy := t.TempDir()
	info, _ := json.Marshal(map[string]any{"Version": testVersion, "Time": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
	for _, m := range published {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(tree, filepath.FromSlash(m.Dir))
		f, err := os.Create(filepath.Join(dir, testVersion+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		if err := zip.CreateFromDir(f, module.Version{Path: m.Path, Version: testVersion}, src); err != nil {
			t.Fatalf("zipping %s: %v", m.Path, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{testVersion + ".mod": gomod, testVersion + ".info": info, "list": []byte(testVersion + "\n")} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return proxy
}

// copyTracked copies the files git tracks under dir (as they are in the
// working tree) into the same place under dst: what a tag would publish.
func copyTracked(t *testing.T, dir, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--", dir)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files %s: %v", dir, err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// proxyEnv is a user's environment with proxy as the module proxy: no
// workspace, a module cache of its own (the versions zipped here must not
// reach the machine's), and the machine's module cache as a second proxy
// for everything from elsewhere. Builds are -trimpath: a module cache of
// its own puts every dependency under a new directory each run, which
// without it misses the build cache for all of them (62 s a run on the
// 2-core machine; 17 s once the trimmed builds are cached).
func proxyEnv(t *testing.T, proxy string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
	env := []string{}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOFLAGS" && k != "GOWORK" && k != "GOPROXY" && k != "GOMODCACHE" && k != "GOSUMDB" && k != "GONOSUMDB" && k != "GOPRIVATE" {
			env = append(env, kv)
		}
	}
	return append(env,
		"GOWORK=off", "GOTOOLCHAIN=local", "GOSUMDB=off", "GOFLAGS=-trimpath",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(cache)+",https://proxy.golang.org",
		"GOMODCACHE="+t.TempDir(),
	)
}

// newConsumer is a fresh module outside the repository.
func newConsumer(t *testing.T, env []string) string {
	t.Helper()
	dir := t.TempDir()
	mustGo(t, dir, env, "mod", "init", "example.com/app")
	return dir
}

func goCmd(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustGo(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := goCmd(dir, env, args...)
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func writeMain(t *testing.T, dir, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goGetLines are the go get commands of the repository's modules in the
// shell blocks of the named docs, as written, comments dropped.
func goGetLines(t *testing.T, docs ...string) []string {
	t.Helper()
	var lines []string
	for _, doc := range docs {
		data, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		inShell := false
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(line, "```sh"):
				inShell = true
			case strings.HasPrefix(line, "```"):
				inShell = false
			case inShell && strings.HasPrefix(line, "go get "+Prefix):
				line, _, _ = strings.Cut(line, "#")
				lines = append(lines, strings.TrimSpace(line))
			}
		}
	}
	return lines
}

// quickstart is the README's Quickstart program, as written.
func quickstart(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Quickstart\n.*?```go\n(.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatal("the README has no Quickstart program")
	}
	return string(m[1])
}

const fiberProgram = `package main

import (
	"log"

	"github.com/gofiber/fiber/v2"
	"github.com/pedreviljoen/gopherpace/adapters/fiberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

func main() {
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(100))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	app := fiber.New()
	app.Use(fiberpace.New(limiter))
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
	log.Fatal(app.Listen("127.0.0.1:0"))
}
`

const grpcProgram = `package main

import (
	"log"
	"net"

	"github.com/pedreviljoen/gopherpace/adapters/grpcpace"
	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/seeds"
	"google.golang.org/grpc"
)

func main() {
	transport, err := memberpace.New(
		memberpace.WithSeeds(seeds.Static{"127.0.0.1:7946"}),
		memberpace.WithPlaintext(),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer transport.Close()
	limiter, err := gopherpace.New(gopherpace.WithRefillRate(1000), gopherpace.WithTransport(transport))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcpace.UnaryServerInterceptor(limiter)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(ln))
}
`

// goInstallLine is the README's go install command of the service.
func goInstallLine(t *testing.T, doc string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "go install "+Prefix+"adapters/rlserver/cmd/gopherpace@") {
			return line
		}
	}
	t.Fatalf("%s has no go install line for the service", doc)
	return ""
}
