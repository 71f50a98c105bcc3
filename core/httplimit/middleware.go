package httplimit

import (
	"context"
	"errors"
	"net/http"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Middleware limits the requests that pass through it with one Limiter.
type Middleware struct {
	limiter *gopherpace.Limiter
	cfg     config
	headers headers.Renderer
}

// New returns middleware that limits requests with l.
func New(l *gopherpace.Limiter, opts ...Option) (*Middleware, error) {
	if l == nil {
		return nil, errors.New("httplimit: nil Limiter")
	}
	c := config{key: GlobalKey}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("httplimit: nil Option")
		}
		o(&c)
	}
	if len(c.errs) > 0 {
		return nil, c.errs[0]
	}
	r, err := headers.New(c.style, c.policy)
	if err != nil {
		return nil, errors.New("httplimit: " + err.Error())
	}
	return &Middleware{limiter: l, cfg: c, headers: r}, nil
}

// Wrap returns next behind the limiter; its signature fits routers' Use.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	c := &m.cfg
	if c.skip != nil && c.skip(r) {
		next.ServeHTTP(w, r)
		return
	}
	key, err := c.key(r)
	if err != nil {
		m.fail(w, r, err)
		return
	}
	cost := int64(1)
	if c.cost != nil {
		cost = c.cost(r)
	}
	now := time.Now()
	d, err := m.limiter.TakeAt(now, key, cost)
	if err != nil {
		m.fail(w, r, err)
		return
	}
	if m.headers.Style() != headers.None || !d.Allowed {
		m.headers.Set(w.Header(), d, now)
	}
	if !d.Allowed {
		if c.deny != nil {
			c.deny(w, r, d)
		} else {
			writeDenied(w)
		}
		return
	}
	if c.inContext {
		r = r.WithContext(context.WithValue(r.Context(), decisionKey{}, d))
	}
	next.ServeHTTP(w, r)
}

func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if m.cfg.onError != nil {
		m.cfg.onError(w, r, err)
		return
	}
	if errors.Is(err, ErrMissingKey) {
		http.Error(w, "Bad Request: missing rate-limit key", http.StatusBadRequest)
		return
	}
	http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
}

type decisionKey struct{}

// FromContext returns the Decision made for the request whose context this
// is, when the middleware runs WithDecisionInContext.
func FromContext(ctx context.Context) (gopherpace.Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(gopherpace.Decision)
	return d, ok
}

// writeDenied answers 429 with a short text body; the headers are set.
func writeDenied(w http.ResponseWriter) {
	hdr := w.Header()
	hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte("Too Many Requests\n"))
}
