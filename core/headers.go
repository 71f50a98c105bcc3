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

// Append appends d's header fields to dst. now is only read for the legacy
// X-RateLimit-Reset, which is an absolute time.
func (h Headers) Append(dst []HeaderField, d Decision, now time.Time) []HeaderField {
	if !d.Allowed {
		dst = append(dst, HeaderField{HeaderRetryAfter, strconv.FormatInt(RetryAfterSeconds(d.RetryAfter), 10)})
	}
	if h.Style == HeadersDraft || h.Style == HeadersBoth {
		dst = append(dst,
			HeaderField{HeaderRateLimitPolicy, h.policyField(d)},
			HeaderField{HeaderRateLimit, h.limitField(d)})
	}
	if h.Style == HeadersLegacy || h.Style == HeadersBoth {
		reset := now.Add(d.ResetAfter + time.Second - 1).Unix()
		dst = append(dst,
			HeaderField{HeaderXLimit, strconv.FormatInt(d.Limit, 10)},
			HeaderField{HeaderXRemaining, strconv.FormatInt(d.Remaining, 10)},
			HeaderField{HeaderXReset, strconv.FormatInt(reset, 10)})
	}
	return dst
}

// Set writes d's header fields into hdr, replacing earlier values.
func (h Headers) Set(hdr http.Header, d Decision, now time.Time) {
	var buf [6]HeaderField
	for _, f := range h.Append(buf[:0], d, now) {
		hdr[f.Name] = []string{f.Value}
	}
}

func (h Headers) name() string {
	if h.Policy == "" {
		return DefaultPolicyName
	}
	return h.Policy
}

// policyField renders `"name";q=<limit>;w=<window seconds>`.
func (h Headers) policyField(d Decision) string {
	b := make([]byte, 0, 48)
	b = appendSFString(b, h.name())
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, max(1, ceilSeconds(d.Window)), 10)
	return string(b)
}

// limitField renders `"name";r=<remaining>;t=<seconds until more quota>`;
// t is left out when the bucket is full.
func (h Headers) limitField(d Decision) string {
	b := make([]byte, 0, 48)
	b = appendSFString(b, h.name())
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	if t := ceilSeconds(d.NextTokenAfter()); t > 0 {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
	}
	return string(b)
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
