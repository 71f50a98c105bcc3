// Command routes runs three replicas of an HTTP service in one process,
// gossiping over real memberlist on loopback, with two cluster-wide limits
// on one transport: a strict one on /login (5 a minute per client) and a
// general one on /api (50 a second per client, and 1,000 an hour per API
// key together). It drives each route from a few clients through every
// replica, prints what each route admitted, and what gossip each limiter
// cost per replica. It ends on its own in a few seconds.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/pedreviljoen/gopherpace/adapters/memberpace"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/httplimit"
	"github.com/pedreviljoen/gopherpace/seeds"
)

func main() {
	seconds := flag.Int("seconds", 3, "seconds of traffic")
	flag.Parse()
	if err := run(os.Stdout, time.Duration(*seconds)*time.Second); err != nil {
		log.Fatal(err)
	}
}

// replica is one node: one transport, one limiter per limit, one server.
type replica struct {
	tr                   *memberpace.Transport
	login, api, apiQuota *gopherpace.Limiter
	url                  string
	srv                  *http.Server
}

func run(out io.Writer, d time.Duration) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var reps []*replica
	defer func() {
		for _, r := range reps {
			r.srv.Close()
			for _, l := range []*gopherpace.Limiter{r.login, r.api, r.apiQuota} {
				if l != nil {
					l.Close() // before the transport: says goodbye
				}
			}
			r.tr.Close()
		}
	}()
	for i := range 3 {
		opts := []memberpace.Option{memberpace.WithBindAddr("127.0.0.1"), memberpace.WithBindPort(0),
			memberpace.WithNodeName(fmt.Sprint("replica-", i)), memberpace.WithLogger(logger)}
		if i > 0 {
			opts = append(opts, memberpace.WithSeeds(seeds.Static{reps[0].tr.GossipAddr()}))
		}
		tr, err := memberpace.New(opts...)
		if err != nil {
			return err
		}
		r := &replica{tr: tr}
		reps = append(reps, r)
		// Limiters sharing a transport need IDs of their own.
		if r.login, err = gopherpace.New(gopherpace.WithRate(5, time.Minute), gopherpace.WithTransport(tr),
			gopherpace.WithLimiterID("login"), gopherpace.WithLogger(logger)); err != nil {
			return err
		}
		if r.api, err = gopherpace.New(gopherpace.WithRate(50, time.Second), gopherpace.WithTransport(tr),
			gopherpace.WithLimiterID("api"), gopherpace.WithLogger(logger)); err != nil {
			return err
		}
		if r.apiQuota, err = gopherpace.New(gopherpace.WithRate(1000, time.Hour), gopherpace.WithTransport(tr),
			gopherpace.WithLimiterID("api-quota"), gopherpace.WithLogger(logger)); err != nil {
			return err
		}
		// The demo's clients name themselves in X-Forwarded-For through
		// this loopback "proxy".
		proxy := httplimit.WithTrustedProxies(netip.MustParsePrefix("127.0.0.0/8"))
		mux := http.NewServeMux()
		ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
		mux.Handle("/login", httplimit.New(r.login, proxy, httplimit.WithPolicyName("login"))(ok))
		mux.Handle("/api/", httplimit.New(r.api, proxy, httplimit.WithPolicyName("api"),
			httplimit.WithAlso(r.apiQuota, httplimit.HeaderKey("X-API-Key"), "api-quota"))(ok))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		r.url = "http://" + ln.Addr().String()
		r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go r.srv.Serve(ln)
	}
	whole := func() bool {
		for _, r := range reps {
			if len(r.tr.Members()) < 2 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !whole(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the replicas never found each other")
		}
	}
	fmt.Fprintf(out, "3 replicas, one memberlist transport each, three limiters on it: login, api, api-quota\n\n")

	client := &http.Client{Timeout: 5 * time.Second}
	get := func(url, clientIP, apiKey string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Forwarded-For", clientIP)
		if apiKey != "" {
			req.Header.Set("X-API-Key", apiKey)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// /login: 3 clients try 10 times each, round-robin over the replicas.
	logins := map[string]int{}
	loginIPs := []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"}
	for attempt := range 10 {
		for c, ip := range loginIPs {
			code, err := get(reps[(attempt+c)%3].url+"/login", ip, "")
			if err != nil {
				return err
			}
			if code == http.StatusOK {
				logins[ip]++
			}
		}
		time.Sleep(50 * time.Millisecond) // a client's attempts come a little apart
	}
	fmt.Fprintf(out, "/login  5 a minute per client, 10 tries each over 3 replicas: admitted %v\n", logins)
	for _, ip := range loginIPs {
		if logins[ip] < 5 || logins[ip] > 6 {
			return fmt.Errorf("client %s logged in %d times; the cluster allows 5 (6 if an attempt beat the gossip), one replica's limit would allow 10", ip, logins[ip])
		}
	}

	// /api: 2 clients, 150 requests a second each, spread over the replicas.
	api := map[string]int{}
	tick := time.NewTicker(time.Second / 300)
	defer tick.Stop()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		<-tick.C
		ip := []string{"203.0.113.1", "203.0.113.2"}[n%2]
		code, err := get(reps[n%3].url+"/api/items", ip, "key-"+ip)
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			api[ip]++
		}
	}
	fmt.Fprintf(out, "/api    50 a second per client, 150 offered a second each for %v: admitted %v (limit about %d each)\n\n",
		d, api, 50*int(d/time.Second)+50)
	fmt.Fprintf(out, "%-10s %-10s %8s %8s %10s\n", "replica", "limiter", "frames", "bytes", "bytes/s")
	for i, r := range reps {
		for _, l := range []struct {
			name string
			l    *gopherpace.Limiter
		}{{"login", r.login}, {"api", r.api}, {"api-quota", r.apiQuota}} {
			s := l.l.Stats()
			fmt.Fprintf(out, "%-10s %-10s %8d %8d %10.0f\n", fmt.Sprint("replica-", i), l.name, s.FramesSent, s.BytesSent,
				float64(s.BytesSent)/(d+time.Second).Seconds())
		}
	}
	return nil
}
