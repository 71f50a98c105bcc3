package rlserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Filling the key cap over the RateLimitService: 101 values of a day-unit
// rule spend its 1,000 each against -max-keys 100, and a new user is
// still answered OK on its first request; the values that were evicted to
// make room still owe their day.
func TestAFullKeyCapLocksNoNewUserOut(t *testing.T) {
	f := newRLS(t, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 1000}\n", false, withMaxKeys(100))
	ask := func(user string, hits uint32) *rlspb.RateLimitResponse {
		return f.ask(t, &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: hits, Descriptors: []*rlv3.RateLimitDescriptor{descriptor("user", user)}})
	}
	for i := range 101 {
		if r := ask(fmt.Sprint("crafted-", i), 1000); r.OverallCode != rlspb.RateLimitResponse_OK {
			t.Fatalf("crafted value %d: %v on its own first day's quota", i, r.OverallCode)
		}
	}
	if r := ask("alice", 1); r.OverallCode != rlspb.RateLimitResponse_OK {
		t.Fatalf("alice: %v, wait %v", r.OverallCode, r.Statuses[0].DurationUntilReset.AsDuration())
	}
	for i := range 101 {
		if r := ask(fmt.Sprint("crafted-", i), 1); r.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("crafted value %d got its day's quota back", i)
		}
	}
}

func allowN(h http.Handler, key string, n int) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/allow?key="+key+"&n="+strconv.Itoa(n), nil))
	return rec.Code
}

// The key cap over /allow: 200,000 invented keys against a cap of 50,000
// leave every new key its own bucket; and at a cap of one, a VIP and a
// default key taking turns are each decided by their own limit.
func TestAFullKeyCapOverHTTP(t *testing.T) {
	t.Run("200,000 keys against a cap of 50,000", func(t *testing.T) {
		l, err := gopherpace.New(gopherpace.WithRefillRate(10), gopherpace.WithBucketSize(10), gopherpace.WithMaxKeys(50_000))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		h := handler(l, nil, nil, nil, nil)
		for i := range 200_000 {
			if code := allowN(h, "crafted-"+strconv.Itoa(i), 10); code != http.StatusOK {
				t.Fatalf("crafted key %d: %d on its own bucket", i, code)
			}
		}
		for _, k := range []string{"tenant-a", "tenant-b", "tenant-c"} {
			if code := allowN(h, k, 10); code != http.StatusOK {
				t.Fatalf("new tenant %s: %d after the flood", k, code)
			}
		}
		if st := l.Stats(); st.LiveKeys > 50_000 {
			t.Fatalf("%d live keys against a cap of 50,000", st.LiveKeys)
		}
	})
	t.Run("a cap of one, a VIP and a default key taking turns", func(t *testing.T) {
		l, err := gopherpace.New(gopherpace.WithRefillRate(1), gopherpace.WithBucketSize(1000), gopherpace.WithMaxKeys(1),
			gopherpace.WithOverride("vip", 100, 5000))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		h := handler(l, nil, nil, nil, nil)
		start := time.Now()
		tokens := 0
		for i := 0; i < 2000 && time.Since(start) < 2*time.Second; i++ {
			if allowN(h, "someone", 10) == http.StatusOK {
				tokens += 10
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/allow?key=vip", nil))
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"limit":5000`) {
				t.Fatalf("turn %d: vip %d %s, want admitted on its own limit", i, rec.Code, rec.Body.String())
			}
		}
		// A bucket of 1,000 and 1 a second: what the default key may have.
		if limit := 1000 + int(time.Since(start).Seconds()) + 1; tokens > limit {
			t.Fatalf("the default key was admitted %d tokens in %v; its own limit allows %d", tokens, time.Since(start), limit)
		}
	})
}
