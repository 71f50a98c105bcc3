package render

import (
	"strconv"
	"time"
	"unsafe"
)

// One decision's fields, rendered without allocating, and the two ways
// they leave: as strings sharing one allocation (Append), or straight into
// an http.Header with one allocation for values and slices (SetHeader).

// fieldBytes holds the longest values of one decision: two quoted
// 64-byte names with their parameters, and four 20-digit integers.
const fieldBytes = 320

// Fields is one decision's fields, rendered into a buffer of its own, so
// that a Fields on the stack renders without allocating. A value is
// either a constant string (the policy field, rendered once) or bytes of
// the buffer.
type Fields struct {
	n     int
	names [MaxFields]string
	fixed [MaxFields]string // the value, when it is a constant
	ends  [MaxFields]int    // where the value ends in the bytes, otherwise
	used  int               // bytes of buf in use
	big   []byte            // the bytes instead of buf, for several policies
	buf   [fieldBytes]byte
}

// bytes are the rendered values, end to end. (Never a slice of buf kept in
// f: a pointer into f stored in f would move every Fields to the heap.)
func (f *Fields) bytes() []byte {
	if f.big != nil {
		return f.big
	}
	return f.buf[:f.used]
}

// Len is the number of fields.
func (f *Fields) Len() int { return f.n }

// Name is field i's canonical name.
func (f *Fields) Name(i int) string { return f.names[i] }

// Value is field i's value. It may point into f: it is valid while f is
// and is not rendered again; copy it to keep it.
func (f *Fields) Value(i int) string {
	if f.fixed[i] != "" {
		return f.fixed[i]
	}
	start := 0
	if i > 0 {
		start = f.ends[i-1]
	}
	if start == f.ends[i] {
		return ""
	}
	if f.big != nil {
		return unsafe.String(&f.big[start], f.ends[i]-start)
	}
	return unsafe.String(&f.buf[start], f.ends[i]-start)
}

// Render renders q's fields in p's style into f. now is read only for the
// legacy X-RateLimit-Reset, an absolute time.
func (f *Fields) Render(p Policy, q Decision, now time.Time) {
	f.RenderMany([]Policy{p}, []Decision{q}, q, now)
}

// RenderMany renders the fields of a request that several policies
// decided together: the draft fields list every policy, in order, with
// its own quota (qs[i] for ps[i]); Retry-After and the legacy fields
// describe q, the decision of them all. The style is ps[0]'s.
func (f *Fields) RenderMany(ps []Policy, qs []Decision, q Decision, now time.Time) {
	// One policy's values fit buf; several render into bytes of their own.
	// (A slice of buf is never stored in f: a pointer into f kept in f
	// would move every Fields to the heap.)
	if len(ps) > 1 {
		f.big = f.render(make([]byte, 0, 2*fieldBytes), ps, qs, q, now)
		return
	}
	f.big = nil
	f.used = len(f.render(f.buf[:0], ps, qs, q, now))
}

// render appends the values to b and notes each field.
func (f *Fields) render(b []byte, ps []Policy, qs []Decision, q Decision, now time.Time) []byte {
	style := ps[0].Style
	f.n = 0
	field := func(name, fixed string) {
		f.names[f.n], f.fixed[f.n], f.ends[f.n] = name, fixed, len(b)
		f.n++
	}
	if !q.Allowed {
		b = strconv.AppendInt(b, RetryAfterSeconds(q.RetryAfter), 10)
		field(RetryAfter, "")
	}
	if style == Draft || style == Both {
		if len(ps) == 1 {
			field(RateLimitPolicy, ps[0].policyValue(ps[0].quotedName(), qs[0]))
		} else {
			for i, p := range ps {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = append(b, p.policyValue(p.quotedName(), qs[i])...)
			}
			field(RateLimitPolicy, "")
		}
		for i, p := range ps {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendLimitField(b, p.quotedName(), qs[i])
		}
		field(RateLimit, "")
	}
	if style == Legacy || style == Both {
		b = strconv.AppendInt(b, q.BucketSize, 10)
		field(XLimit, "")
		b = strconv.AppendInt(b, q.Remaining, 10)
		field(XRemaining, "")
		b = strconv.AppendInt(b, now.Add(q.ResetAfter+time.Second-1).Unix(), 10)
		field(XReset, "")
	}
	return b
}

// quotedName is the policy's name as an sf-string.
func (p Policy) quotedName() string {
	if p.quoted == "" {
		return `"` + DefaultName + `"`
	}
	return p.quoted
}

// policyValue is the RateLimit-Policy value for q: the memo's while the
// limit and window are the memo's.
func (p Policy) policyValue(quoted string, q Decision) string {
	if p.memo != nil {
		if m := p.memo.Load(); m != nil && m.limit == q.BucketSize && m.window == q.Window {
			return m.value
		}
	}
	v := string(appendPolicyField(nil, quoted, q))
	if p.memo != nil {
		p.memo.Store(&policyValue{q.BucketSize, q.Window, v})
	}
	return v
}

// Append appends q's fields to dst. now is read only for the legacy
// X-RateLimit-Reset, an absolute time.
//
// Every value is rendered into one buffer and converted to a string once;
// the fields' values are slices of it, so a request's headers cost at
// most one allocation, however many fields there are.
func Append[F fieldType](dst []F, p Policy, q Decision, now time.Time) []F {
	var f Fields
	f.Render(p, q, now)
	values := string(f.bytes())
	start := 0
	for i := range f.n {
		v := f.fixed[i]
		if v == "" {
			v = values[start:f.ends[i]]
		}
		start = f.ends[i]
		dst = append(dst, F{f.names[i], v})
	}
	return dst
}

// SetHeader writes q's fields into h (an http.Header's map), replacing
// earlier values. The values and the []string of every field share one
// allocation.
func (p Policy) SetHeader(h map[string][]string, q Decision, now time.Time) {
	var f Fields
	f.Render(p, q, now)
	f.SetHeader(h)
}

// SetHeader writes the rendered fields into h (an http.Header's map),
// replacing earlier values, with one allocation for every value and its
// []string (two for the fields of several long-named policies).
func (f *Fields) SetHeader(h map[string][]string) {
	switch {
	case f.n <= 3 && len(f.bytes()) <= smallBytes:
		blk := new(smallBlock)
		f.set(h, blk.values[:], blk.bytes[:])
	case len(f.bytes()) <= fieldBytes:
		blk := new(largeBlock)
		f.set(h, blk.values[:], blk.bytes[:])
	default:
		f.set(h, make([]string, MaxFields), make([]byte, len(f.bytes())))
	}
}

// smallBytes holds the values of most decisions: the draft fields of a
// policy name up to 20 bytes (the policy field is rendered once, apart),
// or the legacy ones.
const smallBytes = 48

// A block is the one allocation behind a response's fields: small for
// up to three fields (96 bytes), large for any.
type (
	smallBlock struct {
		values [3]string
		bytes  [smallBytes]byte
	}
	largeBlock struct {
		values [MaxFields]string
		bytes  [fieldBytes]byte
	}
)

// set writes f into h, with values and bytes from one block.
func (f *Fields) set(h map[string][]string, values []string, bytes []byte) {
	copy(bytes, f.bytes())
	start := 0
	for i := range f.n {
		v := f.fixed[i]
		if v == "" && f.ends[i] > start {
			v = unsafe.String(&bytes[start], f.ends[i]-start)
		}
		start = f.ends[i]
		values[i] = v
		h[f.names[i]] = values[i : i+1 : i+1]
	}
}
