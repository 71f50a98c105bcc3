package rlserver

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/status"
)

// maxKeyBytes is the longest key /allow takes; a longer one is a client
// error, not a bucket.
const maxKeyBytes = 256

// handler serves the HTTP API of the limiter service (docs/service.md):
// /allow, /stats and /healthz as the seed service has them, and /readyz,
// /status and /metrics. While draining is set (shutting down), /readyz
// answers 503 and everything else still serves.
// peers, if set, gives the URLs of the other replicas' status pages, for
// /status/cluster and /status/topkeys?cluster=true.
func handler(l *gopherpace.Limiter, metrics http.Handler, draining *atomic.Bool, rls *rlsService, peers func() []string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/allow", func(w http.ResponseWriter, r *http.Request) { allow(w, r, l) })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		s := l.Stats()
		b := append([]byte(`{"keys":`), strconv.FormatInt(s.LiveKeys, 10)...)
		b = append(append(b, `,"allowed_total":`...), strconv.FormatUint(s.Allowed, 10)...)
		b = append(append(b, `,"denied_total":`...), strconv.FormatUint(s.Denied, 10)...)
		writeJSON(w, http.StatusOK, append(b, "}\n"...))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	ready := status.Ready(l)
	readyz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining != nil && draining.Load() {
			w.Header().Set("Cache-Control", "no-store")
			writeError(w, http.StatusServiceUnavailable, "not ready: shutting down")
			return
		}
		ready.ServeHTTP(w, r)
	})
	mux.Handle("GET /readyz", readyz)
	mux.Handle("GET /healthcheck", healthcheck(readyz))
	if rls != nil {
		mux.Handle("POST /json", jsonHandler(rls))
	}
	page := status.NewPage("gopherpace", l)
	mux.Handle("GET /status", page)
	if peers == nil {
		peers = func() []string { return nil }
	}
	mux.Handle("GET /status/cluster", status.NewClusterPage("gopherpace", page, peers))
	mux.Handle("GET /status/topkeys", topKeysHandler(l, rls, peers))
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

var errBadN = errors.New("n must be a whole number of tokens, at least 1")

// allow answers GET or POST /allow?key=K[&n=N]: whether N tokens of K's
// bucket were spent, as the seed service answers it.
func allow(w http.ResponseWriter, r *http.Request, l *gopherpace.Limiter) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST")
		return
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		// The answer never needs the body, and net/http reads what is
		// left of it after answering, to keep the connection: a client
		// trickling a body would hold the connection (and a graceful
		// shutdown) until the read timeout. Read no more of it, and close
		// after the answer.
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	q := r.URL.Query()
	key := q.Get("key")
	switch {
	case key == "":
		writeError(w, http.StatusBadRequest, "missing key")
		return
	case len(key) > maxKeyBytes:
		writeError(w, http.StatusBadRequest, "key longer than "+strconv.Itoa(maxKeyBytes)+" bytes")
		return
	}
	n := int64(1)
	if s := q.Get("n"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 {
			writeError(w, http.StatusBadRequest, errBadN.Error())
			return
		}
		n = v
	}
	d, err := l.Take(key, n)
	if err != nil {
		// The only errors Take has for a key are the cost's.
		writeError(w, http.StatusBadRequest, "bad n: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.BucketSize, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	b := append([]byte(`{"allowed":`), strconv.FormatBool(d.Allowed)...)
	b = append(append(b, `,"remaining":`...), strconv.FormatInt(d.Remaining, 10)...)
	b = append(append(b, `,"limit":`...), strconv.FormatInt(d.BucketSize, 10)...)
	b = append(append(b, `,"rate":`...), strconv.FormatFloat(ratePerSecond(d), 'f', -1, 64)...)
	code := http.StatusOK
	if !d.Allowed {
		code = http.StatusTooManyRequests
		h.Set("Retry-After", strconv.FormatInt(ceilDiv(d.RetryAfter, time.Second), 10))
		b = append(append(b, `,"retry_after_ms":`...), strconv.FormatInt(ceilDiv(d.RetryAfter, time.Millisecond), 10)...)
	}
	writeJSON(w, code, append(b, "}\n"...))
}

// ratePerSecond is the refill rate of the decision's bucket, in tokens a
// second, to three decimals: its bucket over the time it takes to fill.
func ratePerSecond(d gopherpace.Decision) float64 {
	if d.Window <= 0 {
		return 0
	}
	return math.Round(float64(d.BucketSize)/d.Window.Seconds()*1000) / 1000
}

// ceilDiv is d in units, rounded up; at least 1 for any d > 0.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + unit - 1) / unit)
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, []byte(`{"error":`+strconv.Quote(msg)+"}\n"))
}
