package httplimit

import (
	"context"
	"net/http"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
)

// Middleware limits the requests that pass through it with one Limiter.
type Middleware struct {
	flow *adapter.Flow[*http.Request]
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
	return adapter.Must(Build(l, opts...)).Wrap
}

// Build returns the Middleware for l, or an error naming every invalid
// option.
func Build(l *gopherpace.Limiter, opts ...Option) (*Middleware, error) {
	m := &Middleware{}
	adapter.Apply(&m.cfg, opts, m.cfg.Require)
	var err error
	m.gate, m.flow, err = m.cfg.Build(l, "httplimit", adapter.Hooks[*http.Request]{
		Peer: adapter.RequestPeer, Forwarded: adapter.RequestForwarded, Context: (*http.Request).Context,
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Wrap returns next behind the limiter.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var req adapter.Request
	step := m.flow.Decide(r, &req)
	switch step {
	case adapter.Skip:
		next.ServeHTTP(w, r)
		return
	case adapter.Fail:
		m.fail(w, r, req.Err())
		return
	}
	g := m.gate
	if g.HasFields(&req) {
		g.SetHeaders(w.Header(), &req)
	}
	if g.DecisionInContext() {
		r = r.WithContext(context.WithValue(r.Context(), decisionKey{}, req.Decision()))
	}
	if step == adapter.Deny {
		d := req.Decision()
		if m.cfg.Deny == nil {
			writeDenied(w)
			return
		}
		// A handler that answers nothing must not leave a denied request
		// answered 200: the default denial goes out instead.
		sw := statusWriter{ResponseWriter: w}
		m.cfg.Deny(&sw, r, d)
		if sw.code == 0 {
			writeDenied(w)
		}
		return
	}
	if req.HoldsSlot() {
		defer req.Done() // a panicking handler gives its slot back too
	}
	if !g.Refunds() {
		next.ServeHTTP(w, r)
		if m.cfg.Usage != nil {
			g.Settle(&req, m.cfg.Usage(r, w.Header()))
		}
		return
	}
	sw := statusWriter{ResponseWriter: w}
	next.ServeHTTP(&sw, r)
	m.flow.Finish(&req, sw.status())
	if m.cfg.Usage != nil {
		g.Settle(&req, m.cfg.Usage(r, w.Header()))
	}
}

func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if m.cfg.OnError != nil {
		sw := statusWriter{ResponseWriter: w}
		m.cfg.OnError(&sw, r, err)
		if sw.code != 0 {
			return
		}
	}
	code, msg := adapter.Answer(err)
	http.Error(w, msg, code)
}

type decisionKey struct{}

// FromContext returns the Decision made for the request whose context this
// is, when the middleware runs WithDecisionInContext.
func FromContext(ctx context.Context) (gopherpace.Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(gopherpace.Decision)
	return d, ok
}

// writeDenied answers adapter.DeniedStatus with adapter.DeniedMessage as
// plain text, as http.Error would; the fields are set.
func writeDenied(w http.ResponseWriter) {
	hdr := w.Header()
	hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(adapter.DeniedStatus)
	_, _ = w.Write(deniedBody)
}

var deniedBody = []byte(adapter.DeniedMessage + "\n")
