package adapter

import (
	"errors"
	"fmt"
	"reflect"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// Options are the part of an adapter's configuration every adapter
// shares: the Settings' options and the problems its own options found.
// An adapter's config embeds it (or Config, which does).
type Options struct {
	shared   []Option
	problems []error
}

// Share adds one of the Settings' options.
func (o *Options) Share(opt Option) { o.shared = append(o.shared, opt) }

// Require records problem unless ok; Gate reports every problem at once.
func (o *Options) Require(ok bool, problem string) {
	if !ok {
		o.problems = append(o.problems, errors.New(problem))
	}
}

// Gate is Configure with the options and problems recorded: the Gate for
// l, or every problem, each starting with prefix (the adapter's package
// name).
func (o *Options) Gate(l *gopherpace.Limiter, prefix string) (*Gate, error) {
	return Configure(l, prefix, o.shared, o.problems...)
}

// Config is an HTTP framework adapter's configuration, written once for
// every framework: C is its request (*http.Request, *gin.Context...), and
// Deny, OnError and Usage the types of its deny handler, its error
// handler and its usage func, whose shapes differ by framework. Each
// adapter's options set it through the methods below, which check what
// they are given, so that its With... functions are one line each.
type Config[C, Deny, OnError, Usage any] struct {
	Options
	Key     func(C) (string, error)
	Also    []func(C) (string, error) // the keys of further limits, in order
	Cost    func(C) int64
	Skip    func(C) bool
	Deny    Deny    // nil: the adapter's default answer
	OnError OnError // nil: the adapter's default answer
	Usage   Usage   // nil: no settling after the handler
}

// Apply runs opts on c in order; a nil option is a problem, not a panic.
func Apply[O ~func(*C), C any](c *C, opts []O, require func(ok bool, problem string)) {
	for _, o := range opts {
		if o == nil {
			require(false, "nil Option")
			continue
		}
		o(c)
	}
}

// SetKey sets how requests map to buckets.
func (c *Config[C, D, E, U]) SetKey(f func(C) (string, error)) {
	c.Require(f != nil, "nil KeyFunc")
	c.Key = f
}

// AddAlso adds a limit every request must pass too (Also), keyed by key
// (nil: the same key as Key's).
func (c *Config[C, D, E, U]) AddAlso(l *gopherpace.Limiter, key func(C) (string, error), policy string) {
	c.Share(Also(l, policy))
	c.Also = append(c.Also, key)
}

// SetCost sets a request's tokens.
func (c *Config[C, D, E, U]) SetCost(f func(C) int64) {
	c.Require(f != nil, "nil cost func")
	c.Cost = f
}

// SetSkip sets which requests are exempt.
func (c *Config[C, D, E, U]) SetSkip(f func(C) bool) {
	c.Require(f != nil, "nil skip func")
	c.Skip = f
}

// SetDeny sets what answers a denied request.
func (c *Config[C, D, E, U]) SetDeny(f D) {
	c.Require(!isNilFunc(f), "nil deny handler")
	c.Deny = f
}

// SetOnError sets what answers a request whose key or cost the limiter
// cannot use.
func (c *Config[C, D, E, U]) SetOnError(f E) {
	c.Require(!isNilFunc(f), "nil error handler")
	c.OnError = f
}

// SetUsage sets what an admitted request used, read after its handler.
func (c *Config[C, D, E, U]) SetUsage(f U) {
	c.Require(!isNilFunc(f), "nil usage func")
	c.Usage = f
}

// Settles says whether a usage func is set. (An adapter, which knows the
// handlers' types, compares them with nil itself.)
func (c *Config[C, D, E, U]) Settles() bool { return !isNilFunc(c.Usage) }

// Build is the Gate and the Flow of l with these options, io giving the
// framework's reading of a request (Peer, Forwarded, Context and the
// like; its Key, Also, Cost, Skip and Settles are the options').
func (c *Config[C, D, E, U]) Build(l *gopherpace.Limiter, prefix string, io Hooks[C]) (*Gate, *Flow[C], error) {
	g, err := c.Gate(l, prefix)
	if err != nil {
		return nil, nil, err
	}
	io.Key, io.Also, io.Cost, io.Skip, io.Settles = c.Key, c.Also, c.Cost, c.Skip, c.Settles()
	f, err := NewFlow(g, io)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", prefix, err)
	}
	return g, f, nil
}

// Must is v, or a panic with err: an adapter's constructor for inline
// use is its Build through Must, as a misconfigured server should not
// start.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// isNilFunc reports whether f, a func of any type, is nil; a type
// parameter's value cannot be compared with nil directly.
func isNilFunc(f any) bool {
	v := reflect.ValueOf(f)
	return !v.IsValid() || (v.Kind() == reflect.Func && v.IsNil())
}
