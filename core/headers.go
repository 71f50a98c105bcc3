package gopherpace

import (
	"net/http"
	"strconv"
	"time"
)

// HeaderStyle selects which rate-limit response headers describe a
// Decision. Retry-After is sent on every denial whatever the style.
type HeaderStyle uint8

const (
	// HeadersDraft sends the IETF httpapi draft fields RateLimit-Policy and
	// RateLimit. It is the zero value and the default: its times are deltas,
	// so clients need no synchronised clock.
	HeadersDraft HeaderStyle = iota
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (Unix time in seconds, as GitHub's API does).
	HeadersLegacy
	// HeadersBoth sends the draft and the legacy fields.
	HeadersBoth
	// HeadersNone sends no rate-limit fields (Retry-After still goes out on
	// denials).
	HeadersNone
)

// Header names, canonical for net/http.
const (
	HeaderRetryAfter      = "Retry-After"
	HeaderRateLimitPolicy = "Ratelimit-Policy"
	HeaderRateLimit       = "Ratelimit"
	HeaderXLimit          = "X-Ratelimit-Limit"
	HeaderXRemaining      = "X-Ratelimit-Remaining"
	HeaderXReset          = "X-Ratelimit-Reset"
)

// DefaultPolicyName names the policy in the draft headers when none is set.
const DefaultPolicyName = "default"

// HeaderField is one response header, for frameworks whose headers are not
// an http.Header.
type HeaderField struct{ Name, Value string }

// Headers describes how to render a Decision as response headers.
type Headers struct {
	Style HeaderStyle
	// Policy names the policy in the draft fields; DefaultPolicyName if
	// empty. Check it with ValidPolicyName.
	Policy string
}

// ValidPolicyName reports whether name can be sent as a draft policy name:
// printable ASCII, at most 64 bytes.
func ValidPolicyName(name string) bool {
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

// RetryAfterSeconds is the Retry-After delay-seconds for d: whole seconds
// rounded up, and at least 1 so that a client never retries at once.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(1, ceilSeconds(d))
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// Append appends d's header fields to dst. It reads the clock only for the
// legacy X-RateLimit-Reset, which is an absolute time.
func (h Headers) Append(dst []HeaderField, d Decision) []HeaderField {
	var now time.Time
	if h.Style == HeadersLegacy || h.Style == HeadersBoth {
		now = time.Now()
	}
	return h.AppendAt(dst, d, now)
}

// AppendAt is Append with the legacy reset time computed from now.
//
// Every value is rendered into one buffer and converted to a string once;
// the fields' values are slices of it, so a request's headers cost one
// allocation, however many fields there are.
func (h Headers) AppendAt(dst []HeaderField, d Decision, now time.Time) []HeaderField {
	var scratch [320]byte
	b := scratch[:0]
	var names [6]string
	var ends [6]int
	n := 0
	field := func(name string) {
		names[n], ends[n] = name, len(b)
		n++
	}
	if !d.Allowed {
		b = strconv.AppendInt(b, RetryAfterSeconds(d.RetryAfter), 10)
		field(HeaderRetryAfter)
	}
	if h.Style == HeadersDraft || h.Style == HeadersBoth {
		b = h.appendPolicyField(b, d)
		field(HeaderRateLimitPolicy)
		b = h.appendLimitField(b, d)
		field(HeaderRateLimit)
	}
	if h.Style == HeadersLegacy || h.Style == HeadersBoth {
		b = strconv.AppendInt(b, d.Limit, 10)
		field(HeaderXLimit)
		b = strconv.AppendInt(b, d.Remaining, 10)
		field(HeaderXRemaining)
		b = strconv.AppendInt(b, now.Add(d.ResetAfter+time.Second-1).Unix(), 10)
		field(HeaderXReset)
	}
	values, start := string(b), 0
	for i := range n {
		dst = append(dst, HeaderField{names[i], values[start:ends[i]]})
		start = ends[i]
	}
	return dst
}

// Set writes d's header fields into hdr, replacing earlier values. It
// reads the clock only for the legacy fields.
func (h Headers) Set(hdr http.Header, d Decision) {
	var now time.Time
	if h.Style == HeadersLegacy || h.Style == HeadersBoth {
		now = time.Now()
	}
	h.SetAt(hdr, d, now)
}

// SetAt is Set with the legacy reset time computed from now.
func (h Headers) SetAt(hdr http.Header, d Decision, now time.Time) {
	var buf [6]HeaderField
	fields := h.AppendAt(buf[:0], d, now)
	// One backing array for every field's []string, not one each.
	values := make([]string, len(fields))
	for i, f := range fields {
		values[i] = f.Value
		hdr[f.Name] = values[i : i+1 : i+1]
	}
}

func (h Headers) name() string {
	if h.Policy == "" {
		return DefaultPolicyName
	}
	return h.Policy
}

// appendPolicyField renders `"name";q=<limit>;w=<window seconds>`.
func (h Headers) appendPolicyField(b []byte, d Decision) []byte {
	b = appendSFString(b, h.name())
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, max(1, ceilSeconds(d.Window)), 10)
}

// appendLimitField renders `"name";r=<remaining>;t=<seconds until more
// quota>`; t is left out when the bucket is full.
func (h Headers) appendLimitField(b []byte, d Decision) []byte {
	b = appendSFString(b, h.name())
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	if t := nextTokenSeconds(d); t > 0 {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
	}
	return b
}

// nextTokenSeconds is ceilSeconds(d.NextTokenAfter()) without its two
// divisions in the common case: a bucket that gains a token at least every
// second gains the next one within a second.
func nextTokenSeconds(d Decision) int64 {
	if d.Allowed && d.Remaining < d.Limit && d.ResetAfter > 0 && d.Limit < 1<<33 && d.Window <= time.Duration(d.Limit)*time.Second {
		return 1
	}
	return ceilSeconds(d.NextTokenAfter())
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
