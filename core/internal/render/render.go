// Package render writes rate-limit decisions as HTTP header values. It
// is internal so that both the root package (for Limiter.Wrap) and the
// public headers package can use it without importing each other.
package render

import (
	"net/http"
	"strconv"
	"time"
)

// Decision mirrors gopherpace.Decision field for field, so that a Decision
// converts to it at no cost.
type Decision struct {
	Allowed    bool
	Shadowed   bool
	BucketSize int64
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
	Window     time.Duration
}

// NextTokenAfter is how long until at least one more token becomes
// available: zero when the bucket is full, RetryAfter on a denial.
func (q Decision) NextTokenAfter() time.Duration {
	if !q.Allowed {
		return q.RetryAfter
	}
	if q.Remaining >= q.BucketSize || q.BucketSize <= 0 || q.ResetAfter <= 0 {
		return 0
	}
	interval := q.Window / time.Duration(q.BucketSize)
	if interval <= 0 {
		return 0
	}
	// Tokens appear each time ResetAfter crosses a multiple of interval
	// below Window.
	rem := (q.Window - q.ResetAfter) % interval
	return interval - rem
}

// Style selects the fields; the values match headers.Style.
type Style uint8

const (
	Draft Style = iota
	Legacy
	Both
	None
)

// Field names, canonical for net/http.
const (
	RetryAfter      = "Retry-After"
	RateLimitPolicy = "Ratelimit-Policy"
	RateLimit       = "Ratelimit"
	XLimit          = "X-Ratelimit-Limit"
	XRemaining      = "X-Ratelimit-Remaining"
	XReset          = "X-Ratelimit-Reset"
)

// MaxFields is the most fields one decision renders to.
const MaxFields = 6

// Field is one response header.
type Field struct{ Name, Value string }

// fieldType is any struct type laid out as Field, so that packages can
// render into their own named field types.
type fieldType interface{ ~struct{ Name, Value string } }

// Policy is a style and a policy name, with the name's sf-string quoted
// once rather than on every request, and the values its fields sent
// kept for the next requests (values.go). The zero Policy is the draft
// fields of DefaultName.
type Policy struct {
	Style  Style
	quoted string // the name as an RFC 8941 sf-string
	t      *tables
}

// NewPolicy prepares style and name; name must already be valid.
func NewPolicy(style Style, name string) Policy {
	return Policy{Style: style, quoted: string(appendSFString(nil, name)), t: newTables(style)}
}

// DefaultName names a policy that was given no name.
const DefaultName = "default"

// RetryAfterSeconds is the Retry-After delay-seconds for d: whole seconds
// rounded up, and at least 1 so that a client never retries at once.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(1, CeilSeconds(d))
}

// CeilSeconds is d in whole seconds, rounded up; 0 for d <= 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// appendPolicyField renders `"name";q=<limit>;w=<window seconds>`.
func appendPolicyField(b []byte, quoted string, q Decision) []byte {
	b = append(b, quoted...)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, q.BucketSize, 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, max(1, CeilSeconds(q.Window)), 10)
}

// appendLimitField renders `"name";r=<remaining>;t=<seconds until more
// quota>`; t is left out when it is 0 (the bucket is full).
func appendLimitField(b []byte, quoted string, remaining, seconds int64) []byte {
	b = append(b, quoted...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, remaining, 10)
	if seconds > 0 {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, seconds, 10)
	}
	return b
}

// NextTokenSeconds is CeilSeconds(q.NextTokenAfter()) without its two
// divisions in the common case: a bucket that gains a token at least every
// second gains the next one within a second.
func NextTokenSeconds(q *Decision) int64 {
	if q.Allowed && refillsWithinASecond(q) {
		return 1
	}
	return CeilSeconds(q.NextTokenAfter())
}

// refillsWithinASecond reports whether q's bucket, not full, gains a
// token at least every second: an admit's next token is then 1 second
// away, rounded up.
func refillsWithinASecond(q *Decision) bool {
	return q.Remaining < q.BucketSize && q.ResetAfter > 0 && q.BucketSize < 1<<33 && q.Window <= time.Duration(q.BucketSize)*time.Second
}

// ValidName reports whether name can be sent as a draft policy name:
// printable ASCII, at most 64 bytes.
func ValidName(name string) bool {
	if len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return false
		}
	}
	return true
}

// appendSFString appends s as an RFC 8941 sf-string.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// DeniedMessage is what every adapter, and Limiter.Wrap, says to a
// denied request.
const DeniedMessage = "rate limit exceeded"

// WriteTooManyRequests answers a denied request: q's fields in p's style,
// then 429 with DeniedMessage as plain text.
func WriteTooManyRequests(w http.ResponseWriter, p Policy, q Decision, now time.Time) {
	hdr := w.Header()
	p.SetHeader(hdr, q, now)
	hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(DeniedMessage + "\n"))
}
