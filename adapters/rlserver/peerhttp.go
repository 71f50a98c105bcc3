package rlserver

import (
	"io"
	"net/http"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// envoyproxy/ratelimit's HTTP endpoints, on the HTTP port, for callers
// and probes written against it: /json answers a RateLimitRequest given as
// JSON, and /healthcheck is the readiness probe (/readyz's answer, "OK" in
// the body).

// maxJSONRequest bounds a /json request's body: a RateLimitRequest of the
// most descriptors and entries the gRPC service takes fits many times.
const maxJSONRequest = 1 << 20

// jsonHandler answers POST /json as envoyproxy/ratelimit does: the
// response as JSON, 429 when over the limit, 400 for a request that does
// not parse or is refused.
func jsonHandler(s *rlsService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONRequest+1))
		if err != nil || len(body) > maxJSONRequest {
			writeError(w, http.StatusBadRequest, "the request body is unreadable or over 1 MiB")
			return
		}
		var req rlspb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "not a RateLimitRequest in JSON: "+err.Error())
			return
		}
		resp, err := s.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "the answer could not be written as JSON")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	})
}

// healthcheck answers as ready does, with envoyproxy/ratelimit's body.
func healthcheck(ready http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusOnly{header: http.Header{}}
		ready.ServeHTTP(rec, r)
		if rec.code != 0 && rec.code != http.StatusOK {
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "NOT OK", rec.code)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("OK"))
	})
}

// statusOnly keeps a handler's status and drops its body.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(code int)        { s.code = code }
