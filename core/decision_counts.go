package gopherpace

import "github.com/pedreviljoen/gopherpace/core/internal/bucket"

// What a limiter decided, counted for Stats and metrics exporters. One
// per-processor add per decision: Allow adds to allowOne only, so its
// admit path pays one add (allow.go).
type decisionCounts struct {
	allowOne   bucket.ProcCounter // one-token admits by Allow and AllowAt
	takes      bucket.ProcCounter // admits by Take and the other n-token forms
	takeTokens bucket.ProcCounter // the tokens of those admits
	denied     bucket.ProcCounter // denials of every form
}

func newDecisionCounts() decisionCounts {
	return decisionCounts{allowOne: bucket.NewProcCounter(), takes: bucket.NewProcCounter(), takeTokens: bucket.NewProcCounter(), denied: bucket.NewProcCounter()}
}

// take counts an n-token decision; a shadowed one is counted by shadow
// mode instead (shadow.go).
func (c *decisionCounts) take(d *Decision, n int64) {
	switch {
	case d.Shadowed:
	case d.Allowed:
		c.takes.Add(1)
		c.takeTokens.Add(n)
	default:
		c.denied.Add(1)
	}
}

// fill writes the counts into s.
func (c *decisionCounts) fill(s *Stats) {
	one := uint64(c.allowOne.Load())
	s.Allowed = one + uint64(c.takes.Load())
	s.TokensAllowed = one + uint64(c.takeTokens.Load())
	s.Denied = uint64(c.denied.Load())
}
