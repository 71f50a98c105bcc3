package rlserver

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// dump writes a config's every domain, node and rule, in order, so that
// two readings of one file can be compared.
func dump(c *rlsConfig) string {
	var b strings.Builder
	domains := make([]string, 0, len(c.domains))
	for d := range c.domains {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	var walk func(prefix string, l *descriptorLevel)
	walk = func(prefix string, l *descriptorLevel) {
		keys := make([]string, 0, len(l.next))
		for k := range l.next {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, w := range l.wildcards {
			fmt.Fprintf(&b, "%s wildcard %s\n", prefix, w.finalKey)
		}
		for _, k := range keys {
			n := l.next[k]
			fmt.Fprintf(&b, "%s.%s share=%q", prefix, k, n.shareValue)
			if r := n.rule; r != nil {
				fmt.Fprintf(&b, " rule %s %v %d unlimited=%v shadow=%v name=%q replaces=%v perValue=%v at=%s",
					r.id, r.unit, r.requestsPerUnit, r.unlimited, r.shadow, r.name, r.replaces, r.perValue, r.at)
			}
			b.WriteString("\n")
			walk(prefix+"."+k, &n.descriptorLevel)
		}
	}
	for _, d := range domains {
		walk(d, c.domains[d])
	}
	fmt.Fprintf(&b, "%d rules, %d descriptors, %d rates\n", len(c.rules), c.descriptors, len(c.rates))
	return b.String()
}

// Reading a file item by item gives the very config, or the very error,
// that reading it whole does: for every layout the splitter takes, and
// for those it hands to the whole reading (flow lists, aliases of another
// item's anchor, compact lists at the margin, CRLF lines, keys after the
// list, comments between items, a file that is no config).
func TestItemByItemReadsAsWhole(t *testing.T) {
	files := map[string]string{
		"edge":          edgeConfig,
		"tenants":       tenantsConfig(50, 3),
		"flow list":     "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]\n",
		"margin list":   "domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: second, requests_per_unit: 1}\n- key: b\n  descriptors:\n  - key: c\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
		"list first":    "descriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n# a comment at the margin\n\n  - key: b\n    value: x\n    rate_limit: {unit: hour, requests_per_unit: 3}\ndomain: d\n",
		"crlf":          "domain: d\r\ndescriptors:\r\n  - key: a\r\n    rate_limit: {unit: second, requests_per_unit: 1}\r\n  - key: b\r\n    rate_limit: {unit: second, requests_per_unit: 2}\r\n",
		"alias across":  "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &r {unit: second, requests_per_unit: 1}\n  - key: b\n    rate_limit: *r\n",
		"alias within":  "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &r {unit: second, requests_per_unit: 1}\n    descriptors:\n      - key: b\n        rate_limit: *r\n",
		"block scalar":  "domain: d\ndescriptors:\n  - key: a\n    value: |\n      - key: not an item\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"error late":    "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: b\n    rate_limt: {unit: second, requests_per_unit: 1}\n",
		"syntax late":   "domain: d\ndescriptors:\n  - key: a\n  - key: [b\n",
		"dup across":    "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
		"no config":     strings.Repeat("root:x:0:0:root:/root:/bin/bash\n", 3),
		"empty list":    "domain: d\ndescriptors:\n",
		"twice":         "domain: d\ndescriptors:\n  - key: a\ndescriptors:\n  - key: b\n",
		"key beside":    "domain: d\ndescriptors:\n  - key: a\n  oops: 1\n",
		"less indented": "domain: d\ndescriptors:\n    - key: a\n  - key: b\n",
	}
	for name, text := range files {
		t.Run(name, func(t *testing.T) {
			split := newRLSConfig()
			errSplit := split.add("f.yaml", []byte(text))
			whole := newRLSConfig()
			errWhole := whole.addParts("f.yaml", []byte(text), nil)
			if fmt.Sprint(errSplit) != fmt.Sprint(errWhole) {
				t.Fatalf("item by item: %v\nwhole: %v", errSplit, errWhole)
			}
			if errWhole == nil && dump(split) != dump(whole) {
				t.Fatalf("item by item:\n%s\nwhole:\n%s", dump(split), dump(whole))
			}
		})
	}
	if _, items, ok := splitDescriptors([]byte(tenantsConfig(50, 3))); !ok || len(items) != 50 {
		t.Fatalf("the usual layout was not split: %v, %d items", ok, len(items))
	}
}
