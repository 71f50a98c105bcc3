package httplimit

import (
	"context"
	"net/http"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
)

// Middleware limits the requests that pass through it with one Limiter.
type Middleware struct {
	gate *adapter.Gate
	cfg  config
}

// New returns middleware that limits requests with l, in the shape
// routers' Use takes:
//
//	mux := http.NewServeMux()
//	handler := httplimit.New(limiter)(mux)
//
// It panics on a nil Limiter or an invalid option, as a misconfigured
// server should not start; Build returns the error instead.
func New(l *gopherpace.Limiter, opts ...Option) func(http.Handler) http.Handler {
	m, err := Build(l, opts...)
	if err != nil {
		panic(err)
	}
	return m.Wrap
}

// Build returns the Middleware for l, or an error naming every invalid
// option.
func Build(l *gopherpace.Limiter, opts ...Option) (*Middleware, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			c.require(false, "nil Option")
			continue
		}
		o(&c)
	}
	g, err := adapter.Configure(l, "httplimit", c.shared, c.problems...)
	if err != nil {
		return nil, err
	}
	return &Middleware{gate: g, cfg: c}, nil
}

// Wrap returns next behind the limiter.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	c, g := &m.cfg, m.gate
	if c.skip != nil && c.skip(r) {
		next.ServeHTTP(w, r)
		return
	}
	var req adapter.Request
	if c.key != nil {
		var err error
		if req.Keys[0], err = c.key(r); err != nil {
			m.fail(w, r, err)
			return
		}
	} else {
		var buf [64]byte
		b, err := g.RequestKey(buf[:0], r)
		if err != nil {
			m.fail(w, r, err)
			return
		}
		req.Keys[0] = string(b)
	}
	for i, also := range c.also {
		req.Keys[i+1] = req.Keys[0]
		if also != nil {
			k, err := also(r)
			if err != nil {
				m.fail(w, r, err)
				return
			}
			req.Keys[i+1] = k
		}
	}
	req.Cost = 1
	if c.cost != nil {
		req.Cost = c.cost(r)
	}
	if err := g.Decide(&req); err != nil {
		m.fail(w, r, err)
		return
	}
	d := req.Decision()
	if g.HasFields(d) {
		g.SetHeaders(w.Header(), &req)
	}
	if !d.Allowed {
		if c.deny != nil {
			c.deny(w, r, d)
		} else {
			writeDenied(w)
		}
		return
	}
	if g.DecisionInContext() {
		r = r.WithContext(context.WithValue(r.Context(), decisionKey{}, d))
	}
	if !g.Refunds() {
		next.ServeHTTP(w, r)
		return
	}
	sw := statusWriter{ResponseWriter: w}
	next.ServeHTTP(&sw, r)
	g.Settle(&req, sw.status())
}

func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if m.cfg.onError != nil {
		m.cfg.onError(w, r, err)
		return
	}
	code := adapter.Status(err)
	msg := http.StatusText(code)
	if code == http.StatusBadRequest {
		msg += ": " + err.Error() // what the client must change
	}
	http.Error(w, msg, code)
}

type decisionKey struct{}

// FromContext returns the Decision made for the request whose context this
// is, when the middleware runs WithDecisionInContext.
func FromContext(ctx context.Context) (gopherpace.Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(gopherpace.Decision)
	return d, ok
}

// writeDenied answers 429 with a short text body; the fields are set.
func writeDenied(w http.ResponseWriter) {
	hdr := w.Header()
	hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte("Too Many Requests\n"))
}
