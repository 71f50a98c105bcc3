package rlserver

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is a limit's refill: Tokens every Per.
type Rate struct {
	Tokens int64
	Per    time.Duration
}

// ParseRate reads a rate as the flags take it: a number of tokens a second
// ("10", or "0.5" for one every 2 s, up to three decimals), or tokens per
// period ("100/m", "5000/h", "20/d", "30/10s", "1/500ms"; the units s, m,
// h and d, or any Go duration, up to 366 days).
func ParseRate(s string) (Rate, error) {
	num, unit, hasUnit := strings.Cut(strings.TrimSpace(s), "/")
	per := time.Second
	if hasUnit {
		switch unit = strings.TrimSpace(unit); unit {
		case "s", "sec", "second":
			per = time.Second
		case "m", "min", "minute":
			per = time.Minute
		case "h", "hour":
			per = time.Hour
		case "d", "day":
			per = 24 * time.Hour
		default:
			d, err := time.ParseDuration(unit)
			if err != nil || d <= 0 {
				return Rate{}, fmt.Errorf("%q: the period %q is not s, m, h, d or a duration such as 10s", s, unit)
			}
			per = d
		}
	}
	whole, frac, _ := strings.Cut(strings.TrimSpace(num), ".")
	if len(frac) > 3 || whole == "" && frac == "" {
		return Rate{}, fmt.Errorf("%q is not a rate such as 10, 0.5, 100/m or 30/10s (at most three decimals)", s)
	}
	// 2.5 a second is 25 every 10 s: the decimals move into the period.
	scale := int64(math.Pow10(len(frac)))
	tokens, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || tokens < 1 || strings.ContainsAny(whole+frac, "+-") {
		return Rate{}, fmt.Errorf("%q is not a rate above zero such as 10, 0.5, 100/m or 30/10s", s)
	}
	if per > maxRatePeriod/time.Duration(scale) {
		return Rate{}, fmt.Errorf("%q: the period is longer than 366 days", s)
	}
	per *= time.Duration(scale)
	if g := gcd(tokens, scale); g > 1 {
		tokens, per = tokens/g, per/time.Duration(g)
	}
	if tokens > int64(per) {
		return Rate{}, fmt.Errorf("%q is more than a token a nanosecond", s)
	}
	return Rate{Tokens: tokens, Per: per}, nil
}

// PerSecond is the rate in tokens a second.
func (r Rate) PerSecond() float64 { return float64(r.Tokens) / r.Per.Seconds() }

// String writes the rate as ParseRate reads it: "10/s", "1/2s", "100/m".
func (r Rate) String() string {
	switch r.Per {
	case time.Second:
		return strconv.FormatInt(r.Tokens, 10) + "/s"
	case time.Minute:
		return strconv.FormatInt(r.Tokens, 10) + "/m"
	case time.Hour:
		return strconv.FormatInt(r.Tokens, 10) + "/h"
	case 24 * time.Hour:
		return strconv.FormatInt(r.Tokens, 10) + "/d"
	}
	return strconv.FormatInt(r.Tokens, 10) + "/" + r.Per.String()
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
