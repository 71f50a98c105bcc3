package rlserver

import (
	"encoding/binary"
	"strings"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match finds the rule for one descriptor of a request in domain, as
// envoyproxy/ratelimit does: each entry is looked up at its depth by
// key_value, then by the wildcards in file order, then by key alone; the
// rule is the one at the depth of the last entry (a descriptor with more
// entries than the config has depths matches nothing). It appends the
// descriptor's bucket key to key: every entry's key and value, so each
// distinct set of values has a bucket of its own, except that values a
// share_threshold wildcard matched count under the wildcard, together.
// A nil rule means no limit applies.
func (c *rlsConfig) match(domain string, entries []*rlv3.RateLimitDescriptor_Entry, key []byte) (*rule, []byte) {
	level := c.domains[domain]
	if level == nil {
		return nil, key
	}
	var found *rule
	for i, e := range entries {
		node, shared := level.lookup(e.Key, e.Value)
		if node == nil {
			return found, key
		}
		value := e.Value
		if shared {
			value = node.shareValue
		}
		key = appendEntry(key, e.Key, value, shared)
		if node.rule != nil && i == len(entries)-1 {
			found = node.rule
		}
		if len(node.next) == 0 {
			return found, key
		}
		level = &node.descriptorLevel
	}
	return found, key
}

// lookup is the node an entry selects at this level, and whether it was a
// share_threshold wildcard.
func (l *descriptorLevel) lookup(key, value string) (*descriptorNode, bool) {
	finalKey := key + "_" + value
	if n := l.next[finalKey]; n != nil {
		return n, false
	}
	for _, w := range l.wildcards {
		if wildcardMatch(w.parts, finalKey) {
			n := l.next[w.finalKey]
			return n, n.shareValue != ""
		}
	}
	return l.next[key], false
}

// wildcardMatch reports whether s matches the pattern that parts are the
// pieces of between its stars; a star matches any run of bytes.
func wildcardMatch(parts []string, s string) bool {
	if len(parts) == 1 {
		return parts[0] == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// appendEntry writes one entry into a bucket key so that no two distinct
// descriptors write the same bytes: lengths before the strings, and a mark
// for a shared wildcard's pattern.
func appendEntry(b []byte, key, value string, shared bool) []byte {
	mark := byte(0)
	if shared {
		mark = 1
	}
	b = append(b, mark)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}
