// Package conformance is the contract every gopherpace HTTP adapter keeps,
// as a test suite: the httplimit middleware and the Gin, Echo and Fiber
// adapters each run it against a real server of their framework. It is for
// adapter authors' tests; applications never need it. Beside the suite
// (Run), an adapter's tests check its options with CheckOptions and its
// refill on a virtual clock with RefillsWithVirtualTime, and its
// benchmark is BenchMiddleware: what each adapter writes is only its
// framework's plumbing.
//
// The contract (docs/adapters.md has it as a table):
//   - The default key is the client's address: the connection's peer, or,
//     behind proxies the adapter was told to trust, the forwarded address,
//     walked from the right; IPv6 clients are grouped by /64.
//   - Allowed responses carry the RateLimit-Policy and RateLimit fields
//     (draft style, the default); a denial is 429 with Retry-After and the
//     same fields.
//   - A missing key, or a cost the bucket can never grant, is 400 with the
//     error's text (an error handler is given the error itself); any
//     other key error is 500 with
//     adapter.ServerErrorMessage; neither spends anything. A denial's
//     message is adapter.DeniedMessage. Each message comes in the
//     framework's envelope (plain text, Gin's JSON, Echo's HTTPError).
//   - Skipped requests spend nothing and carry no fields.
//   - A request may cost several tokens, and responses may give their
//     tokens back by status (refunds).
//   - The Decision is available to the deny handler, and to handlers when
//     asked for. A denied or failed request never reaches the route, even
//     when the application's handler forgets to stop it, and one whose
//     handler answers nothing gets the adapter's own answer.
//   - A further limit (WithAlso) is passed together with the adapter's
//     own, all or nothing, and the draft fields list both policies.
//   - Clustered, a limit spent through one node's server is spent for
//     every node's.
//   - What a request used, measured after its handler (WithUsage), is
//     charged beyond its cost, into debt that denies the key until refill
//     repays it, or given back below it.
//   - With a delay allowed (WithMaxDelay), a request whose tokens are due
//     within it waits for them and is admitted; one due later is denied
//     at once.
package conformance

import (
	"net/netip"
	"testing"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"github.com/pedreviljoen/gopherpace/core/headers"
)

// Handler is a kind of deny or error handler an application may write.
type Handler int

const (
	// NoHandler leaves the adapter's own answer.
	NoHandler Handler = iota
	// Answering writes its answer the framework's way (and, in Gin,
	// aborts).
	Answering
	// Careless writes its answer (Answering's status and body) but neither
	// aborts nor returns an error: the request must stop all the same.
	Careless
	// Silent writes nothing: the adapter's own answer must go out, never
	// a 200.
	Silent
)

// Key is where a request's bucket key comes from.
type Key int

const (
	// KeyClientIP keys by the client's address (the default).
	KeyClientIP Key = iota
	// KeyGlobal puts every request in the limiter's global bucket.
	KeyGlobal
	// KeyHeader keys by the request header named in Setup.KeyHeader; a
	// request without it is a key error (400).
	KeyHeader
	// KeyFailing is a key function that fails every request with an error
	// that is not the request's fault (500).
	KeyFailing
)

// Setup is one configuration of the adapter under test, in terms every
// adapter has an option for. The zero Setup is the adapter's defaults.
type Setup struct {
	Key       Key
	KeyHeader string // for KeyHeader
	// TrustedProxies and IPv6Prefix configure client addresses (see
	// package clientip); zero values are the defaults.
	TrustedProxies []netip.Prefix
	IPv6Prefix     int
	// CostHeader, if set, names a request header holding the cost as a
	// decimal integer; requests without it cost 1.
	CostHeader string
	// SkipPath, if set, is a path whose requests skip the limiter.
	SkipPath string
	// RefundFrom, if set, gives back the tokens of responses with this
	// status or above.
	RefundFrom int
	// Headers and Policy select the rate-limit fields.
	Headers headers.Style
	Policy  string
	// Deny installs a deny handler of that kind (Answering: 429 with the
	// body "denied" and "X-Denied-Remaining: <Decision.Remaining>").
	Deny Handler
	// OnError installs an error handler of that kind (Answering: 503 with
	// the body "failed" and "X-Error: <ErrorName(the error)>").
	OnError Handler
	// DecisionInContext makes the Decision available to handlers; the
	// handler of "/" then answers with "X-Remaining: <Decision.Remaining>".
	DecisionInContext bool
	// Also, if set, is a further limit every request must pass too,
	// keyed by the request header AlsoKeyHeader, its policy named
	// AlsoPolicy.
	Also          *gopherpace.Limiter
	AlsoKeyHeader string
	AlsoPolicy    string
	// MaxDelay, if set, shapes: requests whose tokens are due within it
	// wait for them (WithMaxDelay).
	MaxDelay time.Duration
	// UsageHeader, if set, names a request header holding what the request
	// used as a decimal integer, charged after the handler (WithUsage).
	UsageHeader string
	// InFlight, if set, caps the requests in flight (WithConcurrency, or
	// with InFlightPerKey WithConcurrencyPerKey).
	InFlight       *gopherpace.InFlight
	InFlightPerKey bool
}

// A Server starts l behind the adapter under test, configured by s, on a
// real listener on loopback, and returns its base URL ("http://ip:port");
// it stops the server when t ends. It serves:
//
//	GET /      200 "ok", once Hold(the request's X-Hold header) returns
//	GET /fail  500
//	GET /skip  200 "ok"
type Server func(t *testing.T, l *gopherpace.Limiter, s Setup) (url string)

// Run runs the whole suite against server.
func Run(t *testing.T, server Server) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, server) })
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, server Server)
}
