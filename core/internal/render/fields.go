package render

import (
	"strconv"
	"time"
)

// One decision's fields, and the two ways they leave: as strings (Append,
// Fields.Value), or straight into an http.Header (SetHeader). Their
// values come from the policy's tables (values.go), so a response whose
// values were sent before renders nothing and allocates nothing.

// fieldBytes holds the longest value of one policy: a quoted 64-byte name
// with its parameters.
const fieldBytes = 192

// manyPolicies is how many policies RenderMany renders on the stack (the
// adapters combine at most four); more render on the heap.
const manyPolicies = 4

// Fields is one decision's fields. It is small enough for the stack, and
// holds only pointers to shared values.
type Fields struct {
	n      int
	names  [MaxFields]string
	values [MaxFields]*value
}

// Len is the number of fields.
func (f *Fields) Len() int { return f.n }

// Name is field i's canonical name.
func (f *Fields) Name(i int) string { return f.names[i] }

// Value is field i's value. It is shared: never write into its bytes.
func (f *Fields) Value(i int) string { return f.values[i].text() }

func (f *Fields) add(name string, v *value) {
	f.names[f.n], f.values[f.n] = name, v
	f.n++
}

// Render renders q's fields in p's style into f. now is read only for the
// legacy X-RateLimit-Reset, an absolute time.
func (f *Fields) Render(p Policy, q Decision, now time.Time) {
	if !f.RenderAdmitted(&p, &q) {
		f.n = 0
		p.each(q, now, f.add)
	}
}

// RenderAdmitted is Render for most responses, an admit in the draft
// style, with nothing copied: it renders the two fields, in each's order
// without its calls, and reports true, or, for any other decision or
// style, renders nothing and reports false.
func (f *Fields) RenderAdmitted(p *Policy, q *Decision) bool {
	if p.Style != Draft || !q.Allowed {
		return false
	}
	pv, lv := p.draftValues(q)
	f.names[0], f.values[0] = RateLimitPolicy, pv
	f.names[1], f.values[1] = RateLimit, lv
	f.n = 2
	return true
}

// DraftTexts are the values of an admit's draft fields, as text.
func (p *Policy) DraftTexts(q *Decision) (policy, limit string) {
	pv, lv := p.draftValues(q)
	return pv.field[0], lv.field[0]
}

// draftValues are the values of q's draft fields. Most responses (an
// admit whose bucket refills within a second and whose values were sent
// before) take the first branch, which calls nothing, so that nothing
// is saved around a call either: findDraftValues is the general case.
func (p *Policy) draftValues(q *Decision) (policy, limit *value) {
	if q.Allowed && refillsWithinASecond(q) {
		t := p.tables()
		policy, limit = t.policy.find(q.BucketSize, int64(q.Window)), t.limit.find(q.Remaining, 1)
		if policy != nil && limit != nil {
			return policy, limit
		}
	}
	return p.findDraftValues(q)
}

// findDraftValues finds q's draft values, rendering those not sent
// before.
func (p *Policy) findDraftValues(q *Decision) (policy, limit *value) {
	t := p.tables()
	policy = p.policyValue(t, q)
	s := NextTokenSeconds(q)
	if limit = t.limit.find(q.Remaining, s); limit == nil {
		limit = p.renderLimit(t, q.Remaining, s)
	}
	return policy, limit
}

// each calls add with each of q's fields in p's style, in order.
func (p Policy) each(q Decision, now time.Time, add func(name string, v *value)) {
	t := p.tables()
	if !q.Allowed {
		add(RetryAfter, t.retryAfter.integer(RetryAfterSeconds(q.RetryAfter)))
	}
	if p.Style == Draft || p.Style == Both {
		pv, lv := p.draftValues(&q)
		add(RateLimitPolicy, pv)
		add(RateLimit, lv)
	}
	if p.Style == Legacy || p.Style == Both {
		legacy(t, q, now, add)
	}
}

// RenderMany renders the fields of a request that several policies
// decided together: the draft fields list every policy, in order, with
// its own quota (qs[i] for ps[i]); Retry-After and the legacy fields
// describe q, the decision of them all. The style is ps[0]'s. The draft
// values, one of a kind, cost two allocations (their text, and the pair).
func (f *Fields) RenderMany(ps []Policy, qs []Decision, q Decision, now time.Time) {
	if len(ps) == 1 {
		f.Render(ps[0], qs[0], now)
		return
	}
	p := ps[0]
	t := p.tables()
	f.n = 0
	if !q.Allowed {
		f.add(RetryAfter, t.retryAfter.integer(RetryAfterSeconds(q.RetryAfter)))
	}
	if p.Style == Draft || p.Style == Both {
		var buf [2 * fieldBytes * manyPolicies]byte
		b := buf[:0]
		for i, p := range ps {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, p.policyValue(p.tables(), &qs[i]).text()...)
		}
		split := len(b)
		for i, p := range ps {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendLimitField(b, p.quotedName(), qs[i].Remaining, NextTokenSeconds(&qs[i]))
		}
		s := string(b)
		pair := new([2]value)
		pair[0].field[0], pair[1].field[0] = s[:split], s[split:]
		f.add(RateLimitPolicy, &pair[0])
		f.add(RateLimit, &pair[1])
	}
	if p.Style == Legacy || p.Style == Both {
		legacy(t, q, now, f.add)
	}
}

// legacy adds the X-RateLimit fields of q.
func legacy(t *tables, q Decision, now time.Time, add func(name string, v *value)) {
	add(XLimit, t.xLimit.integer(q.BucketSize))
	add(XRemaining, t.xRemaining.integer(q.Remaining))
	add(XReset, t.xReset.integer(now.Add(q.ResetAfter+time.Second-1).Unix()))
}

// tables are the policy's values; the zero Policy's are shared.
func (p *Policy) tables() *tables {
	if p.t == nil {
		return defaultTables
	}
	return p.t
}

// quotedName is the policy's name as an sf-string.
func (p *Policy) quotedName() string {
	if p.quoted == "" {
		return `"` + DefaultName + `"`
	}
	return p.quoted
}

// policyValue is the RateLimit-Policy value for q's bucket size and
// window.
func (p *Policy) policyValue(t *tables, q *Decision) *value {
	if v := t.policy.find(q.BucketSize, int64(q.Window)); v != nil {
		return v
	}
	return p.renderPolicy(t, q)
}

// renderPolicy renders and keeps a RateLimit-Policy value not sent before.
func (p *Policy) renderPolicy(t *tables, q *Decision) *value {
	var b [fieldBytes]byte
	return t.policy.keep(q.BucketSize, int64(q.Window), appendPolicyField(b[:0], p.quotedName(), *q))
}

// renderLimit renders and keeps a RateLimit value not sent before.
func (p *Policy) renderLimit(t *tables, remaining, seconds int64) *value {
	var b [fieldBytes]byte
	return t.limit.keep(remaining, seconds, appendLimitField(b[:0], p.quotedName(), remaining, seconds))
}

// integer is the value of a field that is the integer a.
func (t *valueTable) integer(a int64) *value {
	if v := t.find(a, 0); v != nil {
		return v
	}
	var b [20]byte
	return t.keep(a, 0, strconv.AppendInt(b[:0], a, 10))
}

// Append appends q's fields to dst. now is read only for the legacy
// X-RateLimit-Reset, an absolute time. The values are shared with other
// responses: a response whose values were sent before costs no
// allocation.
func Append[F fieldType](dst []F, p Policy, q Decision, now time.Time) []F {
	var f Fields
	f.Render(p, q, now)
	for i := range f.n {
		dst = append(dst, F{f.names[i], f.values[i].text()})
	}
	return dst
}

// SetHeader writes q's fields into h (an http.Header's map), replacing
// earlier values.
func (p Policy) SetHeader(h map[string][]string, q Decision, now time.Time) {
	if !p.SetAdmitted(h, &q) {
		p.each(q, now, func(name string, v *value) { h[name] = v.header() })
	}
}

// SetAdmitted is SetHeader for most responses, an admit in the draft
// style, with nothing copied: it writes the two fields and reports true,
// or, for any other decision or style, writes nothing and reports false.
func (p *Policy) SetAdmitted(h map[string][]string, q *Decision) bool {
	if p.Style != Draft || !q.Allowed {
		return false
	}
	pv, lv := p.draftValues(q)
	h[RateLimitPolicy] = pv.header()
	h[RateLimit] = lv.header()
	return true
}

// SetHeader writes the rendered fields into h (an http.Header's map),
// replacing earlier values. The []string of each is shared with other
// responses (see value), so this allocates nothing.
func (f *Fields) SetHeader(h map[string][]string) {
	for i := range f.n {
		h[f.names[i]] = f.values[i].header()
	}
}

// SlotPolicyName names an in-flight limit in the draft fields.
const SlotPolicyName = "inflight"

// AddSlots adds an in-flight limit of limit requests, free of them free,
// to the draft fields in f: `"inflight";q=<limit>;qu="concurrent-requests"`
// to RateLimit-Policy and `"inflight";r=<free>` to RateLimit (the draft's
// quota unit for requests in flight; no window and no reset, since a slot
// frees when a request ends, not at a time). Fields without the draft
// ones (the legacy style) are left alone. It costs three allocations.
func (f *Fields) AddSlots(limit, free int64) {
	pi, li := f.index(RateLimitPolicy), f.index(RateLimit)
	if pi < 0 || li < 0 {
		return
	}
	var buf [2 * fieldBytes]byte
	b := append(buf[:0], f.values[pi].text()...)
	b = append(b, `, "`+SlotPolicyName+`";q=`...)
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, `;qu="concurrent-requests"`...)
	split := len(b)
	b = append(b, f.values[li].text()...)
	b = append(b, `, "`+SlotPolicyName+`";r=`...)
	b = strconv.AppendInt(b, max(0, free), 10)
	s := string(b)
	pair := new([2]value)
	pair[0].field[0], pair[1].field[0] = s[:split], s[split:]
	f.values[pi], f.values[li] = &pair[0], &pair[1]
}

// index is the position of the field named name in f, or -1.
func (f *Fields) index(name string) int {
	for i := range f.n {
		if f.names[i] == name {
			return i
		}
	}
	return -1
}
