package conformance

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/adapter"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Options are an adapter's option constructors, in the terms of a Setup,
// so that OptionsFor can turn any Setup into the adapter's options. Every
// field is required.
type Options[O any] struct {
	GlobalKey         func() O
	HeaderKey         func(name string) O
	KeyError          func(err error) O // a key function that returns err
	TrustedProxies    func(...netip.Prefix) O
	IPv6Prefix        func(bits int) O
	CostFromHeader    func(name string) O // cost Cost(the request's value of the header)
	SkipPath          func(path string) O // skip requests for this path
	Refund            func(when func(status int) bool) O
	PolicyName        func(string) O
	Headers           func(headers.Style) O
	DenyHandler       func(Handler) O // answers as Setup.Deny says
	ErrorHandler      func(Handler) O // answers as Setup.OnError says
	DecisionInContext func() O
	// AlsoFromHeader adds l as a further limit keyed by the request
	// header name, its policy named policy.
	AlsoFromHeader func(l *gopherpace.Limiter, name, policy string) O
	MaxDelay       func(time.Duration) O
	// UsageFromHeader charges after the handler what the request header
	// name holds (Cost of its value).
	UsageFromHeader   func(name string) O
	Concurrency       func(*gopherpace.InFlight) O
	ConcurrencyPerKey func(*gopherpace.InFlight) O
	// NilFuncs are the adapter's options that take a func, each given
	// nil (WithKeyFunc(nil), WithCost(nil)...): every one must be
	// refused.
	NilFuncs []O
}

// ErrKeyFailing is the error of the KeyFailing key function: the
// server's fault, not the request's.
var ErrKeyFailing = errors.New("conformance: the key store is down")

// ErrorName names an error an error handler was given by the error
// errors.Is finds in it: "ErrCostExceedsLimit", "ErrMissingKey" or
// "ErrKeyFailing", else "unknown: " and its text. An Answering error
// handler sends it as X-Error.
func ErrorName(err error) string {
	for _, known := range []struct {
		name string
		err  error
	}{
		{"ErrCostExceedsLimit", gopherpace.ErrCostExceedsLimit},
		{"ErrMissingKey", adapter.ErrMissingKey},
		{"ErrKeyFailing", ErrKeyFailing},
	} {
		if errors.Is(err, known.err) {
			return known.name
		}
	}
	return "unknown: " + err.Error()
}

// OptionsFor returns the options that configure an adapter as s says.
func OptionsFor[O any](s Setup, o Options[O]) []O {
	opts := []O{o.Headers(s.Headers)}
	switch s.Key {
	case KeyGlobal:
		opts = append(opts, o.GlobalKey())
	case KeyHeader:
		opts = append(opts, o.HeaderKey(s.KeyHeader))
	case KeyFailing:
		opts = append(opts, o.KeyError(ErrKeyFailing))
	}
	if len(s.TrustedProxies) > 0 {
		opts = append(opts, o.TrustedProxies(s.TrustedProxies...))
	}
	if s.IPv6Prefix > 0 {
		opts = append(opts, o.IPv6Prefix(s.IPv6Prefix))
	}
	if s.CostHeader != "" {
		opts = append(opts, o.CostFromHeader(s.CostHeader))
	}
	if s.SkipPath != "" {
		opts = append(opts, o.SkipPath(s.SkipPath))
	}
	if s.RefundFrom > 0 {
		from := s.RefundFrom
		opts = append(opts, o.Refund(func(status int) bool { return status >= from }))
	}
	if s.Policy != "" {
		opts = append(opts, o.PolicyName(s.Policy))
	}
	if s.Deny != NoHandler {
		opts = append(opts, o.DenyHandler(s.Deny))
	}
	if s.OnError != NoHandler {
		opts = append(opts, o.ErrorHandler(s.OnError))
	}
	if s.DecisionInContext {
		opts = append(opts, o.DecisionInContext())
	}
	if s.Also != nil {
		opts = append(opts, o.AlsoFromHeader(s.Also, s.AlsoKeyHeader, s.AlsoPolicy))
	}
	if s.MaxDelay > 0 {
		opts = append(opts, o.MaxDelay(s.MaxDelay))
	}
	if s.UsageHeader != "" {
		opts = append(opts, o.UsageFromHeader(s.UsageHeader))
	}
	switch {
	case s.InFlight != nil && s.InFlightPerKey:
		opts = append(opts, o.ConcurrencyPerKey(s.InFlight))
	case s.InFlight != nil:
		opts = append(opts, o.Concurrency(s.InFlight))
	}
	return opts
}

// CheckOptions checks an adapter's handling of its options: build (its
// Build) returns an error starting prefix+": " for a nil limiter, a nil
// option, each of o.NilFuncs and each option given a value out of range,
// and inline (its constructor for inline use) panics on each;
// KeepsErrorChains holds for the policy name.
func CheckOptions[O any](t *testing.T, prefix string, o Options[O], build func(*gopherpace.Limiter, ...O) error, inline func(*gopherpace.Limiter, ...O)) {
	t.Helper()
	var nilOption O
	invalid := map[string][]O{
		"nil option": {nilOption}, "nil refund": {o.Refund(nil)}, "style": {o.Headers(9)}, "policy": {o.PolicyName("")}, "policy with a line break": {o.PolicyName("new\nline")},
		"IPv6 prefix -1": {o.IPv6Prefix(-1)}, "IPv6 prefix 0": {o.IPv6Prefix(0)}, "IPv6 prefix 129": {o.IPv6Prefix(129)},
		"a valid option beside a nil one": {o.GlobalKey(), nilOption},
	}
	if len(o.NilFuncs) == 0 {
		t.Fatal("Options.NilFuncs is empty")
	}
	for i, opt := range o.NilFuncs {
		invalid[fmt.Sprintf("nil func %d", i)] = []O{opt}
	}
	l := Limiter(t, 1, 1)
	RejectsInvalidOptions(t, prefix, invalid,
		func(opts ...O) error { return build(l, opts...) },
		func(opts ...O) { inline(l, opts...) })
	KeepsErrorChains(t, prefix, o.PolicyName, func(opts ...O) error { return build(l, opts...) })
	// Every problem is reported at once.
	one, other := build(l, o.NilFuncs[0]), build(l, o.PolicyName(""))
	both := build(l, o.NilFuncs[0], o.PolicyName(""))
	for _, alone := range []error{one, other} {
		if both == nil || !strings.Contains(both.Error(), strings.TrimPrefix(alone.Error(), prefix+": ")) {
			t.Errorf("two bad options: %v; want it to say %q", both, alone)
		}
	}
	RejectsInvalidOptions(t, prefix, map[string][]O{"nil limiter": nil},
		func(opts ...O) error { return build(nil, opts...) },
		func(opts ...O) { inline(nil, opts...) })
}

// RejectsInvalidOptions checks an adapter's handling of bad options: for
// each named set in invalid, build returns an error starting with
// prefix+": ", and inline (the constructor for inline use) panics.
func RejectsInvalidOptions[O any](t *testing.T, prefix string, invalid map[string][]O, build func(...O) error, inline func(...O)) {
	t.Helper()
	for name, opts := range invalid {
		if err := build(opts...); err == nil || !strings.HasPrefix(err.Error(), prefix+": ") {
			t.Errorf("%s: error %v, want one starting %s:", name, err, prefix)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: the inline constructor did not panic", name)
				}
			}()
			inline(opts...)
		}()
	}
}

// KeepsErrorChains checks that an error an option reports keeps its chain
// through the adapter's constructor: build(policyName("")) fails with an
// error starting prefix+": " in which errors.Is finds headers.ErrPolicyName.
func KeepsErrorChains[O any](t *testing.T, prefix string, policyName func(string) O, build func(...O) error) {
	t.Helper()
	err := build(policyName(""))
	if !errors.Is(err, headers.ErrPolicyName) || !strings.HasPrefix(err.Error(), prefix+": ") {
		t.Errorf("errors.Is(%v, headers.ErrPolicyName) is false, or the error does not start %s:", err, prefix)
	}
}
