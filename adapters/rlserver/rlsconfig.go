package rlserver

import (
	"errors"
	"fmt"
	"google.golang.org/protobuf/types/known/structpb"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gopherpace "github.com/pedreviljoen/gopherpace/core"
	"go.yaml.in/yaml/v3"
)

// The limits of the RateLimitService, written in envoyproxy/ratelimit's
// YAML format so that its users can point their files at this server
// (docs/service.md#the-config-file says where the two differ):
//
//	domain: edge
//	descriptors:
//	  - key: remote_address          # no value: one bucket per address
//	    rate_limit: {unit: second, requests_per_unit: 10}
//	  - key: path
//	    value: /login
//	    rate_limit: {unit: minute, requests_per_unit: 5}
//
// A file holds one domain; a directory of files holds several, each domain
// in one file only.

// The most a config may hold, so that loading it costs bounded time and
// memory (docs/service.md#the-config-file): bytes of YAML, descriptors,
// and distinct rates (each rate is a limiter of its own, rls.go). Tests
// lower them.
var (
	maxConfigBytes       = 64 << 20
	maxConfigDescriptors = 250_000
	maxRates             = 1000
)

// rlsConfig is a loaded set of limits: each domain's tree of descriptor
// levels, and every rule that has a rate.
type rlsConfig struct {
	domains     map[string]*descriptorLevel
	rules       map[string]*rule // by id
	descriptors int
	bytes       int
	rates       map[[3]int64]bool // tokens, per, bucket size
	merge       bool              // a domain may be given in several files
}

// descriptorLevel is one depth of a domain's descriptors, looked up as
// envoyproxy/ratelimit does: the entry's key_value, then the wildcards in
// file order, then the key alone (one limit per distinct value).
type descriptorLevel struct {
	next      map[string]*descriptorNode // by "key" or "key_value"
	wildcards []wildcard
}

type descriptorNode struct {
	descriptorLevel // the next depth
	rule            *rule
	// shareValue, set by share_threshold on a wildcard, is what every value
	// matching the wildcard counts under: one bucket for all of them.
	shareValue string
	// finalKey is the node's name in the stats keys: "key_value" as the
	// file gives it ("key" alone, or a wildcard's pattern).
	finalKey string
	// valueToMetric puts the request's value in the stats key at this
	// depth (value_to_metric).
	valueToMetric bool
}

// wildcard is a descriptor whose value holds '*' (any run of bytes), kept
// split on the stars.
type wildcard struct {
	finalKey string
	parts    []string
}

// rule is a descriptor's rate_limit.
type rule struct {
	// id names the rule's limiter on the wire, the same on every replica
	// given the same file: the domain and the path of key_value, as
	// envoyproxy/ratelimit names its limits ("edge.path_/login").
	id              string
	unit            rlspb.RateLimitResponse_RateLimit_Unit
	requestsPerUnit uint32
	unlimited       bool
	shadow          bool
	// quota: quota_mode, a budget rather than a gate. Every hit on it
	// spends, into debt where the bucket lacks them (a usage reported
	// after the response), and a request is denied by quota rules only
	// when every quota rule it matches is over (rls.go).
	quota bool
	// multiplier: a request's limit override of requests_per_unit every
	// multiplier units; 0 is 1 (overrides.go).
	multiplier uint32
	// detailed (detailed_metric) puts every value of the request in the
	// rule's stats key; valuesInStats is set when the key takes any of the
	// request's values (detailed, or value_to_metric at some depth), so
	// it is built per request (stats.go).
	detailed, valuesInStats bool
	// hits counts the rule's hits by stat, with -rule-metrics (stats.go).
	hits statCounts
	// metadata is the descriptor's metadata, returned in the response's
	// dynamic metadata when it passes (-response-dynamic-metadata).
	metadata *structpb.Struct
	name     string
	replaces []string
	// perValue: the rule has a bucket per distinct value of the levels
	// that take many values. Otherwise it has one bucket, the limiter's
	// global one. Either way a contended bucket shares its rate out by each
	// replica's offered load (core/internal/cluster: fairness.go, key_shares.go).
	perValue bool
	at       string // file:line, for messages
	// limiter is the limiter of the rule's rate, set when its config is
	// swapped in (rls.go); nil for a rule that never limits (unlimited,
	// or a requests_per_unit of 0).
	limiter *gopherpace.Limiter
	// decisions counts the rule's descriptors by outcome, when
	// -rule-metrics asks (metrics.go).
	decisions [ruleOutcomes]atomic.Uint64
}

// The outcomes a rule's descriptor is counted under.
const (
	ruleOK = iota
	ruleOverLimit
	ruleShadowDenied
	ruleOutcomes
)

// The unit names and periods envoyproxy/ratelimit accepts: a month is 30
// days and a year 365, as it counts them.
var unitPeriods = map[rlspb.RateLimitResponse_RateLimit_Unit]time.Duration{
	rlspb.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlspb.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlspb.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlspb.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// A rule's unit up to a month is its period; a year is given as a token
// per its share of the year (a day for 365 a year), which is the same
// rate and keeps the limiter's name (rateID) that replicas share.
const wholeUnitUpTo = 30 * 24 * time.Hour

// maxRatePeriod is the longest period gopherpace's WithRate takes.
const maxRatePeriod = 366 * 24 * time.Hour

// rate is the rule as a token bucket: requests_per_unit tokens per unit,
// in a bucket of requests_per_unit, so a full bucket is one window's worth.
func (r *rule) rate() (tokens int64, per time.Duration, bucketSize int64) {
	n, unit := int64(r.requestsPerUnit), unitPeriods[r.unit]*time.Duration(max(r.multiplier, 1))
	if unit <= wholeUnitUpTo {
		return n, unit, n
	}
	return 1, unit / time.Duration(n), n
}

// The keys each mapping of the file may hold. envoyproxy/ratelimit takes
// any of its keys at any depth and ignores the misplaced ones; here a
// misplaced key is an error, since it never does what it says.
var (
	rootKeys       = keySet("domain", "descriptors")
	descriptorKeys = keySet("key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
		"detailed_metric", "value_to_metric", "share_threshold", "metadata")
	rateLimitKeys = keySet("unit", "requests_per_unit", "unlimited", "name", "replaces")
	replacesKeys  = keySet("name")
)

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// loadRLSConfig reads path: one YAML file, or every config file under a
// directory (configFiles). merge lets a domain be given in several files,
// their descriptors merged; otherwise a domain given twice is an error.
// Every error names the file and the line.
func loadRLSConfig(path string, merge bool) (*rlsConfig, error) {
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	c := newRLSConfig()
	c.merge = merge
	for _, f := range files {
		data, err := readBounded(f, maxConfigBytes-c.bytes)
		if err != nil {
			return nil, err
		}
		if err := c.add(f, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// configFiles are the files a -config path names: the path itself for a
// file; for a directory, every file under it, at any depth, named .yaml,
// .yml or with no extension (envoyproxy/ratelimit loads a runtime
// directory this way), in lexical order. Names that begin with a dot are
// passed over, files and directories alike: a Kubernetes ConfigMap mount
// keeps a second copy of every file under "..data" and a dated
// "..2026_..." directory. Links to files are followed; links to
// directories are not.
func configFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == path {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if ext := filepath.Ext(d.Name()); ext != ".yaml" && ext != ".yml" && ext != "" {
			return nil
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return nil // a link to a directory, or a dangling one
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no config files (.yaml, .yml, or without an extension) under it", path)
	}
	return files, nil
}

// readBounded reads a file of at most limit bytes; a larger one is an
// error, read no further than the limit.
func readBounded(name string, limit int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%s: the config is over %d KiB in all: the server refuses more", name, maxConfigBytes>>10)
	}
	return data, nil
}

func newRLSConfig() *rlsConfig {
	return &rlsConfig{domains: map[string]*descriptorLevel{}, rules: map[string]*rule{}, rates: map[[3]int64]bool{}}
}

// parseRLSConfig reads one file's text; name is what errors call it.
func parseRLSConfig(name string, data []byte) (*rlsConfig, error) {
	c := newRLSConfig()
	if err := c.add(name, data); err != nil {
		return nil, err
	}
	return c, nil
}

// configError is a mistake at a line of a file.
type configError struct {
	file string
	line int
	msg  string
}

func (e *configError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }

type fileParser struct{ file string }

func (p fileParser) errorf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &configError{p.file, line, fmt.Sprintf(format, args...)}
}

// add loads one file's domain into c: item by item when its text is laid
// out so (yamlchunks.go), whole otherwise.
func (c *rlsConfig) add(file string, data []byte) error {
	if c.bytes += len(data); c.bytes > maxConfigBytes {
		return fmt.Errorf("%s: the config is over %d KiB in all: the server refuses more", file, maxConfigBytes>>10)
	}
	if rest, items, ok := splitDescriptors(data); ok {
		counted := c.descriptors
		if err := c.addParts(file, rest, items); err != errNotAlone {
			return err
		}
		c.descriptors = counted // the whole reading counts them again
	}
	return c.addParts(file, data, nil)
}

// errNotAlone says that a file's items did not read one by one.
var errNotAlone = errors.New("the descriptors do not read one by one")

// addParts loads a file's domain from rootText, and its descriptors from
// items, or, without items, from rootText's own list. With items, a part
// that does not read alone is errNotAlone.
func (c *rlsConfig) addParts(file string, rootText []byte, items []descriptorItem) error {
	p := fileParser{file}
	var doc yaml.Node
	if err := yaml.Unmarshal(rootText, &doc); err != nil {
		if items != nil {
			return errNotAlone
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Content) == 0 {
		if items != nil {
			return errNotAlone
		}
		return &configError{file, 1, "empty file: a config needs a domain"}
	}
	root := doc.Content[0]
	fields, err := p.mapping(root, rootKeys)
	if err != nil {
		return err
	}
	domainNode := fields["domain"]
	domain, err := p.text(domainNode, "domain")
	if err != nil {
		return err
	}
	if domain == "" {
		return p.errorf(orNode(domainNode, root), "the domain is empty: every config file needs one")
	}
	if _, dup := c.domains[domain]; dup && !c.merge {
		return p.errorf(domainNode, "domain %q is already defined in another file (to merge a domain's files, -merge-domains)", domain)
	}
	level := &descriptorLevel{next: map[string]*descriptorNode{}}
	if items == nil {
		err = p.descriptors(c, level, domain, false, false, fields["descriptors"])
	}
	for _, it := range items {
		list, ok := readItem(it)
		if !ok {
			return errNotAlone
		}
		if err = p.descriptors(c, level, domain, false, false, list); err != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	if have := c.domains[domain]; have != nil {
		return p.mergeInto(have, level, domainNode, domain)
	}
	c.domains[domain] = level
	return nil
}

// mergeInto adds level's descriptors, read from another file, to have, a
// domain's first: a descriptor both define at the same depth is an error,
// as within one file.
func (p fileParser) mergeInto(have, level *descriptorLevel, at *yaml.Node, path string) error {
	for k, n := range level.next {
		if _, dup := have.next[k]; dup {
			return p.errorf(at, "descriptor %q is defined in two files of its domain", path+"."+k)
		}
		have.next[k] = n
	}
	have.wildcards = append(have.wildcards, level.wildcards...)
	return nil
}

func orNode(n, fallback *yaml.Node) *yaml.Node {
	if n != nil {
		return n
	}
	return fallback
}

// mapping checks that n is a mapping whose keys are strings in allowed,
// and returns its values by key.
func (p fileParser) mapping(n *yaml.Node, allowed map[string]bool) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, "expected a mapping of keys to values, found %s", kindName(n))
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return nil, p.errorf(k, "a key must be a string, found %s", kindName(k))
		}
		if !allowed[k.Value] {
			return nil, p.errorf(k, "unknown key %q here (this mapping takes %s)", k.Value, listKeys(allowed))
		}
		out[k.Value] = v
	}
	return out, nil
}

func listKeys(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return fmt.Sprintf("%q", truncate(n.Value, 40)) // a file that is no config (a misplaced mount) is not echoed whole
}

// text is a scalar's text ("" when absent or null): a value written as a
// number is its digits, as envoyproxy/ratelimit reads it.
func (p fileParser) text(n *yaml.Node, what string) (string, error) {
	if n == nil || n.Tag == "!!null" {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", p.errorf(n, "%s must be a string, found %s", what, kindName(n))
	}
	return n.Value, nil
}

func (p fileParser) flag(n *yaml.Node, what string) (bool, error) {
	if n == nil || n.Tag == "!!null" {
		return false, nil
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		return false, p.errorf(n, "%s must be true or false, found %s", what, kindName(n))
	}
	return b, nil
}

// descriptors loads a list of descriptors into level; parent is the
// path so far ("edge" or "edge.key1_value1"), and perValue whether a
// level on it takes many values (a key alone, or a wildcard that does not
// share).
func (p fileParser) descriptors(c *rlsConfig, level *descriptorLevel, parent string, perValue, valuesAbove bool, n *yaml.Node) error {
	if n == nil || n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return p.errorf(n, "descriptors must be a list, found %s", kindName(n))
	}
	for _, d := range n.Content {
		if c.descriptors++; c.descriptors > maxConfigDescriptors {
			return p.errorf(d, "more than %d descriptors in the config: each is a rule held in memory, so the server refuses more", maxConfigDescriptors)
		}
		fields, err := p.mapping(d, descriptorKeys)
		if err != nil {
			return err
		}
		key, err := p.text(fields["key"], "key")
		if err != nil {
			return err
		}
		if key == "" {
			return p.errorf(orNode(fields["key"], d), "a descriptor needs a key")
		}
		value, err := p.text(fields["value"], "value")
		if err != nil {
			return err
		}
		finalKey := key
		if value != "" {
			finalKey += "_" + value
		}
		path := parent + "." + finalKey
		if _, dup := level.next[finalKey]; dup {
			return p.errorf(d, "descriptor %q is defined twice", path)
		}
		node := &descriptorNode{descriptorLevel: descriptorLevel{next: map[string]*descriptorNode{}}}
		quota, err := p.flag(fields["quota_mode"], "quota_mode")
		if err != nil {
			return err
		}
		detailed, err := p.flag(fields["detailed_metric"], "detailed_metric")
		if err != nil {
			return err
		}
		if node.valueToMetric, err = p.flag(fields["value_to_metric"], "value_to_metric"); err != nil {
			return err
		}
		node.finalKey = finalKey
		var metadata *structpb.Struct
		if m := fields["metadata"]; m != nil && m.Tag != "!!null" {
			if m.Kind != yaml.MappingNode {
				return p.errorf(m, "metadata must be a mapping, found %s", kindName(m))
			}
			var v map[string]any
			if err := m.Decode(&v); err != nil {
				return p.errorf(m, "metadata: %v", err)
			}
			if metadata, err = structpb.NewStruct(v); err != nil {
				return p.errorf(m, "metadata: %v", err)
			}
		}
		shadow, err := p.flag(fields["shadow_mode"], "shadow_mode")
		if err != nil {
			return err
		}
		share, err := p.flag(fields["share_threshold"], "share_threshold")
		if err != nil {
			return err
		}
		wild := strings.Contains(finalKey, "*")
		perValue := perValue || value == "" || wild && !share
		if share {
			if !wild {
				return p.errorf(fields["share_threshold"], "share_threshold needs a wildcard value (one holding '*'), and %q has none", path)
			}
			node.shareValue = value
		}
		if wild {
			level.wildcards = append(level.wildcards, wildcard{finalKey, strings.Split(finalKey, "*")})
		}
		if rl := fields["rate_limit"]; rl != nil && rl.Tag != "!!null" {
			if node.rule, err = p.rateLimit(rl, path, shadow); err != nil {
				return err
			}
			node.rule.quota = quota
			node.rule.detailed = detailed
			node.rule.metadata = metadata
			node.rule.valuesInStats = detailed || node.valueToMetric || valuesAbove
			node.rule.perValue = perValue
			c.rules[path] = node.rule
			if !node.rule.unlimited && node.rule.requestsPerUnit > 0 {
				tokens, per, size := node.rule.rate()
				if c.rates[[3]int64{tokens, int64(per), size}] = true; len(c.rates) > maxRates {
					return p.errorf(rl, "more than %d distinct rates (requests_per_unit and unit) in the config: each is a limiter of its own, so the server refuses more", maxRates)
				}
			}
		}
		if err := p.descriptors(c, &node.descriptorLevel, path, perValue, valuesAbove || node.valueToMetric, fields["descriptors"]); err != nil {
			return err
		}
		level.next[finalKey] = node
	}
	return nil
}

// rateLimit loads a descriptor's rate_limit, with envoyproxy/ratelimit's
// checks: a unit it knows unless unlimited (and none when unlimited), and
// replaces entries that name another limit.
func (p fileParser) rateLimit(n *yaml.Node, path string, shadow bool) (*rule, error) {
	fields, err := p.mapping(n, rateLimitKeys)
	if err != nil {
		return nil, err
	}
	r := &rule{id: path, shadow: shadow, at: fmt.Sprintf("%s:%d", p.file, n.Line)}
	if r.unlimited, err = p.flag(fields["unlimited"], "unlimited"); err != nil {
		return nil, err
	}
	unit, err := p.text(fields["unit"], "unit")
	if err != nil {
		return nil, err
	}
	v, known := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unit)]
	valid := known && v != int32(rlspb.RateLimitResponse_RateLimit_UNKNOWN)
	switch {
	case r.unlimited && valid:
		return nil, p.errorf(fields["unit"], "an unlimited rate_limit takes no unit")
	case !r.unlimited && !valid:
		return nil, p.errorf(orNode(fields["unit"], n), "invalid rate limit unit %q (second, minute, hour, day, week, month or year)", unit)
	}
	r.unit = rlspb.RateLimitResponse_RateLimit_Unit(v)
	if rpu := fields["requests_per_unit"]; rpu != nil && rpu.Tag != "!!null" {
		if rpu.Kind != yaml.ScalarNode || rpu.Tag != "!!int" || rpu.Decode(&r.requestsPerUnit) != nil {
			return nil, p.errorf(rpu, "requests_per_unit must be a whole number from 0 to 4294967295, found %s", kindName(rpu))
		}
	}
	if r.name, err = p.text(fields["name"], "name"); err != nil {
		return nil, err
	}
	if rep := fields["replaces"]; rep != nil && rep.Tag != "!!null" {
		if rep.Kind != yaml.SequenceNode {
			return nil, p.errorf(rep, "replaces must be a list, found %s", kindName(rep))
		}
		for _, e := range rep.Content {
			ef, err := p.mapping(e, replacesKeys)
			if err != nil {
				return nil, err
			}
			name, err := p.text(ef["name"], "name")
			if err != nil {
				return nil, err
			}
			switch {
			case name == "":
				return nil, p.errorf(e, "a replaces entry needs a name")
			case name == r.name:
				return nil, p.errorf(e, "a limit cannot replace itself (%q)", name)
			}
			r.replaces = append(r.replaces, name)
		}
	}
	return r, nil
}
