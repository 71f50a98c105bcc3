package gopherpace

// What a limiter decided, counted for Stats and metrics exporters. One
// per-processor add per decision: Allow adds to allowOne only, so its
// admit path pays one add (allow.go).
type decisionCounts struct {
	allowOne   procCounter // one-token admits by Allow and AllowAt
	takes      procCounter // admits by Take and the other n-token forms
	takeTokens procCounter // the tokens of those admits
	denied     procCounter // denials of every form
}

func newDecisionCounts() decisionCounts {
	return decisionCounts{allowOne: newProcCounter(), takes: newProcCounter(), takeTokens: newProcCounter(), denied: newProcCounter()}
}

// take counts an n-token decision; a shadowed one is counted by shadow
// mode instead (shadow.go).
func (c *decisionCounts) take(d *Decision, n int64) {
	switch {
	case d.Shadowed:
	case d.Allowed:
		c.takes.add(1)
		c.takeTokens.add(n)
	default:
		c.denied.add(1)
	}
}

// fill writes the counts into s.
func (c *decisionCounts) fill(s *Stats) {
	one := uint64(c.allowOne.load())
	s.Allowed = one + uint64(c.takes.load())
	s.TokensAllowed = one + uint64(c.takeTokens.load())
	s.Denied = uint64(c.denied.load())
}
