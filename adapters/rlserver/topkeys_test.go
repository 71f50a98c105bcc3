package rlserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// replica is one service's HTTP API and RateLimitService keeping top keys.
type replica struct {
	svc *rlsService
	l   *gopherpace.Limiter
	srv *httptest.Server
}

func newReplica(t *testing.T, name string, peers func() []string, show bool) *replica {
	t.Helper()
	cfg, err := parseRLSConfig("test.yaml", []byte(edgeConfig))
	if err != nil {
		t.Fatal(err)
	}
	top := gopherpace.WithTopKeys(show)
	svc, err := newRLSService(cfg, nil, gopherpace.DefaultMaxKeys, false, quiet, nil, top)
	if err != nil {
		t.Fatal(err)
	}
	l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithNodeName(name), top, gopherpace.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(l, nil, nil, svc, peers))
	t.Cleanup(func() {
		srv.Close()
		svc.close()
		l.Close()
	})
	return &replica{svc, l, srv}
}

func (r *replica) hit(t *testing.T, n int, kv ...string) {
	t.Helper()
	for range n {
		if _, err := r.svc.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{descriptor(kv...)}}); err != nil {
			t.Fatal(err)
		}
	}
}

func getTopKeys(t *testing.T, url string) (int, TopKeysView) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v TopKeysView
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, v
}

// In a storm /status/topkeys answers "who?": the descriptors denied most,
// by rule and value, on this replica and summed over the cluster; a
// replica that does not answer is named with why.
func TestTopKeysOfTheCluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String() + "/status"
	ln.Close()
	b := newReplica(t, "b", nil, true)
	a := newReplica(t, "a", func() []string { return []string{b.srv.URL + "/status", gone} }, true)
	// 10.9.9.9 is over its 20 a minute on both replicas; 10.7.7.7 on a
	// only, by less; the HTTP API's "tenant-x" on b.
	a.hit(t, 50, "remote_address", "10.9.9.9")
	b.hit(t, 50, "remote_address", "10.9.9.9")
	a.hit(t, 60, "remote_address", "10.7.7.7")
	for range 30 {
		b.l.Take("tenant-x", 1)
	}

	code, own := getTopKeys(t, a.srv.URL+"/status/topkeys")
	if code != http.StatusOK || own.Node != "a" || len(own.RLS.Denied) != 2 {
		t.Fatalf("a's own: %d %+v", code, own)
	}
	if k := own.RLS.Denied[0]; k.Key != "edge.remote_address{remote_address=10.7.7.7}" || k.Count != 40 {
		t.Fatalf("a's most denied: %+v, want 10.7.7.7's rule and value denied 40", k)
	}

	code, all := getTopKeys(t, a.srv.URL+"/status/topkeys?cluster=true&n=5")
	if code != http.StatusOK {
		t.Fatalf("cluster: %d", code)
	}
	if fmt.Sprint(all.Nodes) != "[a b]" || all.Unreachable[gone] == "" || len(all.Unreachable) != 1 {
		t.Fatalf("nodes %v, unreachable %v: want a and b read and %s named", all.Nodes, all.Unreachable, gone)
	}
	if k := all.RLS.Denied[0]; k.Key != "edge.remote_address{remote_address=10.9.9.9}" || k.Count != 60 {
		t.Fatalf("the cluster's most denied: %+v, want 10.9.9.9 denied 30 on each replica", all.RLS.Denied)
	}
	if len(all.Allow.Denied) != 1 || all.Allow.Denied[0] != (gopherpace.KeyCount{Key: "tenant-x", Count: 29}) {
		t.Fatalf("the HTTP API's: %+v, want tenant-x denied 29", all.Allow.Denied)
	}
	for _, q := range []string{"n=0", "n=101", "n=x"} {
		if code, _ := getTopKeys(t, a.srv.URL+"/status/topkeys?"+q); code != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, code)
		}
	}
}

// With -top-keys hashed no key's bytes leave the replica.
func TestTopKeysHashed(t *testing.T) {
	a := newReplica(t, "a", nil, false)
	a.hit(t, 30, "remote_address", "10.9.9.9")
	_, v := getTopKeys(t, a.srv.URL+"/status/topkeys")
	if len(v.RLS.Denied) != 1 || !strings.HasPrefix(v.RLS.Denied[0].Key, "#") {
		t.Fatalf("hashed: %+v", v.RLS.Denied)
	}
}

// A bucket key is shown as its rule and entries; one cut short, or any
// bytes at all, never panics and keeps what it has.
func TestReadableBucketKey(t *testing.T) {
	r := &rule{id: "edge.tenant_acme.user", perValue: true}
	var key []byte
	key = appendEntry(key, "tenant", "acme", false)
	key = appendEntry(key, "user", "u-17", false)
	full := bucketKey(r, key)
	if got := readableBucketKey(full); got != "edge.tenant_acme.user{tenant=acme,user=u-17}" {
		t.Fatalf("readable: %q", got)
	}
	for i := range len(full) {
		got := readableBucketKey(full[:i])
		if i > len(r.id) && !strings.HasSuffix(got, "…}") && !strings.HasSuffix(got, "}") {
			t.Errorf("cut at %d: %q", i, got)
		}
	}
	if got := readableBucketKey("edge.remote_address"); got != "edge.remote_address" {
		t.Fatalf("a rule's one bucket: %q", got)
	}
}

func FuzzReadableBucketKey(f *testing.F) {
	f.Add("edge.x\x00\x00\x03key\x05value")
	f.Add("edge.x\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
	f.Add("\x00\x00")
	f.Fuzz(func(t *testing.T, s string) { _ = readableBucketKey(s) })
}

// gopherpace serve lists the keys by default, by hash with -top-keys
// hashed, not at all with off; any other value is refused at start.
func TestServeTopKeysFlag(t *testing.T) {
	for _, c := range []struct{ flag, want string }{{"", "tenant-x"}, {"hashed", "#"}, {"off", ""}} {
		var flags []string
		if c.flag != "" {
			flags = []string{"-top-keys", c.flag}
		}
		addr, _ := runServer(t, append(flags, "-rate", "1/m")...)
		for range 5 {
			resp, err := http.Get("http://" + addr + "/allow?key=tenant-x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		_, v := getTopKeys(t, "http://"+addr+"/status/topkeys")
		switch {
		case c.want == "" && len(v.Allow.Denied) != 0:
			t.Errorf("-top-keys off lists %+v", v.Allow.Denied)
		case c.want != "" && (len(v.Allow.Denied) != 1 || !strings.HasPrefix(v.Allow.Denied[0].Key, c.want) || v.Allow.Denied[0].Count != 4):
			t.Errorf("-top-keys %q lists %+v, want one key starting %q denied 4", c.flag, v.Allow.Denied, c.want)
		}
	}
	if _, err := ParseFlags([]string{"-top-keys", "all"}, func(string) string { return "" }, io.Discard); err == nil || !strings.Contains(err.Error(), "-top-keys") {
		t.Fatalf("-top-keys all: %v", err)
	}
}
