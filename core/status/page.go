package status

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	gopherpace "github.com/pedreviljoen/gopherpace/core"
)

// A Page serves one self-contained HTML page (no scripts, styles or images
// from elsewhere) with this node's view of a limiter: its policy, its
// members and when each was last heard, what it allowed and denied per
// second recently as a small chart, and its gossip. The page reloads
// itself every RefreshEvery. The chart's samples are taken every
// RefreshEvery whether or not anyone is looking (a timer, which stops once
// the limiter is closed), so the first look already shows the last two
// minutes. A Page is safe for concurrent use.
type Page struct {
	title   string
	limiter *gopherpace.Limiter

	mu      sync.Mutex
	samples []sample // oldest first, at most maxSamples
}

// RefreshEvery is how often the page reloads itself.
const RefreshEvery = 2 * time.Second

const maxSamples = 60

type sample struct {
	at                         time.Time
	allowed, denied, shadowed  uint64
	bytesSent, bytesReceived   uint64
	framesSent, framesReceived uint64
}

// NewPage returns the status page of l, titled title (a service's name,
// say), and starts sampling l for its chart.
func NewPage(title string, l *gopherpace.Limiter) *Page {
	p := &Page{title: title, limiter: l}
	p.record(l.Stats(), time.Now())
	time.AfterFunc(RefreshEvery, p.sampleEvery)
	return p
}

// sampleEvery takes a sample and schedules the next one, until the
// limiter is closed.
func (p *Page) sampleEvery() {
	s := p.limiter.Stats()
	if s.Closed {
		return
	}
	p.record(s, time.Now())
	time.AfterFunc(RefreshEvery, p.sampleEvery)
}

// record adds a sample; one taken within a tenth of RefreshEvery of the
// last replaces it, so that viewers reloading often do not crowd out the
// history.
func (p *Page) record(s gopherpace.Stats, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	x := sample{now, s.Allowed, s.Denied, s.ShadowDenials, s.BytesSent, s.BytesReceived, s.FramesSent, s.FramesReceived}
	if n := len(p.samples); n > 1 && now.Sub(p.samples[n-2].at) < RefreshEvery/10 {
		p.samples[n-1] = x
		return
	}
	p.samples = append(p.samples, x)
	if len(p.samples) > maxSamples {
		p.samples = p.samples[len(p.samples)-maxSamples:]
	}
}

// ServeHTTP renders the page; with ?format=json, this node's view as JSON
// (a NodeView), for a ClusterPage of another node.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := p.limiter.Stats()
	now := time.Now()
	p.record(s, now)
	p.mu.Lock()
	view := p.view(s, now)
	p.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(view.node())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplate.Execute(w, view); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// pageView is what the template shows.
type pageView struct {
	Title, Node, Rate, Verdict string
	Whole                      bool
	Refresh                    int
	Stats                      gopherpace.Stats
	Peers                      []peerRow
	Rates                      string // allowed and denied per second, recently
	Chart                      template.HTML
	Generated                  string
	// The keys denied and admitted most lately (WithTopKeys): this
	// node's, and the cluster's as the nodes send them each other.
	TopDenied, TopAdmitted               []gopherpace.KeyCount
	ClusterTopDenied, ClusterTopAdmitted []gopherpace.KeyCount
}

// TopShown is how many keys a page lists as denied and as admitted most.
const TopShown = 10

type peerRow struct {
	Name, LastHeard, State string
	InSight                bool
}

// view builds the page's view; p.mu is held.
func (p *Page) view(s gopherpace.Stats, now time.Time) pageView {
	l := p.limiter
	tokens, per := l.Rate()
	v := pageView{
		Title: p.title, Node: l.NodeName(), Stats: s, Refresh: int(RefreshEvery / time.Second),
		Rate:      fmt.Sprintf("%d per %s, bucket %d", tokens, period(per), l.BucketSize()),
		Generated: now.UTC().Format(time.RFC3339),
	}
	v.Whole, v.Verdict = Check(l)
	for _, pr := range l.Peers() {
		row := peerRow{Name: pr.Name, InSight: pr.InSight, State: "in sight"}
		switch {
		case pr.Leaving:
			row.State = "leaving"
		case !pr.InSight:
			row.State = "out of sight"
		}
		row.LastHeard = "never"
		if pr.Heard {
			row.LastHeard = pr.LastHeard.Round(time.Millisecond).String() + " ago"
		}
		v.Peers = append(v.Peers, row)
	}
	v.Rates, v.Chart = p.chart()
	v.TopDenied, v.TopAdmitted = l.TopKeysAt(now, TopShown)
	if s.Clustered {
		v.ClusterTopDenied, v.ClusterTopAdmitted = l.ClusterTopKeysAt(now, TopShown)
	}
	return v
}

// period names a rate's period in words where it can.
func period(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}

// chart draws allowed and denied per second between consecutive samples
// as bars, newest on the right; p.mu is held.
func (p *Page) chart() (string, template.HTML) {
	if len(p.samples) < 2 {
		return "the chart fills as samples come in, every " + RefreshEvery.String(), ""
	}
	type bar struct{ allowed, denied float64 }
	var bars []bar
	peak := 1.0
	for i := 1; i < len(p.samples); i++ {
		a, b := p.samples[i-1], p.samples[i]
		secs := b.at.Sub(a.at).Seconds()
		if secs <= 0 {
			continue
		}
		br := bar{float64(b.allowed-a.allowed+b.shadowed-a.shadowed) / secs, float64(b.denied-a.denied) / secs}
		bars = append(bars, br)
		peak = max(peak, br.allowed+br.denied)
	}
	if len(bars) == 0 {
		return "the chart fills as samples come in, every " + RefreshEvery.String(), ""
	}
	const w, h = 600.0, 120.0
	step := w / float64(maxSamples-1)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" role="img" aria-label="requests per second">`, w, h+16)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="#f6f8fa"/>`, w, h)
	for i, br := range bars {
		x := w - float64(len(bars)-i)*step
		ah, dh := h*br.allowed/peak, h*br.denied/peak
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2da44e"/>`, x, h-ah, step*0.8, ah)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#cf222e"/>`, x, h-ah-dh, step*0.8, dh)
	}
	fmt.Fprintf(&b, `<text x="4" y="%.0f" font-size="11" fill="#57606a">peak %.0f/s; green allowed, red denied</text></svg>`, h+13, peak)
	last := bars[len(bars)-1]
	return fmt.Sprintf("%.0f allowed and %.0f denied per second, lately", last.allowed, last.denied), template.HTML(b.String())
}

var pageTemplate = template.Must(template.Must(template.New("page").Parse(keysTemplate)).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>{{.Title}} · gopherpace · {{.Node}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2328}
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse}td,th{padding:3px 12px 3px 0;text-align:left}
th{color:#57606a;font-weight:600}.ok{color:#1a7f37}.bad{color:#cf222e}.num{text-align:right;font-variant-numeric:tabular-nums}
</style></head><body>
<h1>{{.Title}}</h1>
<div>node <b id="node">{{.Node}}</b> · {{.Rate}} · <span class="{{if .Whole}}ok{{else}}bad{{end}}" id="verdict">{{if .Whole}}whole{{else}}degraded{{end}}: {{.Verdict}}</span></div>
<h2>Decisions</h2>
<table>
<tr><th>allowed</th><td class="num" id="allowed">{{.Stats.Allowed}}</td><th>denied</th><td class="num" id="denied">{{.Stats.Denied}}</td><th>shadow passes</th><td class="num">{{.Stats.ShadowDenials}}</td><th>tokens allowed</th><td class="num">{{.Stats.TokensAllowed}}</td></tr>
</table>
<p id="rates">{{.Rates}}</p>
{{.Chart}}
{{if or .ClusterTopDenied .ClusterTopAdmitted}}
<h2>Keys denied most, the whole cluster, last 1–2 minutes</h2>
{{template "keys" .ClusterTopDenied}}
<h2>Keys admitted most (sampled), the whole cluster</h2>
{{template "keys" .ClusterTopAdmitted}}
{{end}}
{{if or .TopDenied .TopAdmitted}}
<h2>Keys denied most, this node, last 1–2 minutes</h2>
{{template "keys" .TopDenied}}
<h2>Keys admitted most (sampled), this node</h2>
{{template "keys" .TopAdmitted}}
{{end}}
{{if .Stats.Clustered}}
<h2>Members ({{.Stats.VisibleNodes}} of {{.Stats.KnownNodes}} in sight)</h2>
<table id="members">
<tr><th>name</th><th>state</th><th>last heard</th></tr>
<tr><td>{{.Node}} (this node)</td><td class="ok">in sight</td><td>—</td></tr>
{{range .Peers}}<tr><td>{{.Name}}</td><td class="{{if .InSight}}ok{{else}}bad{{end}}">{{.State}}</td><td>{{.LastHeard}}</td></tr>
{{end}}</table>
<h2>Gossip</h2>
<table>
<tr><th>frames sent</th><td class="num" id="frames-sent">{{.Stats.FramesSent}}</td><th>bytes sent</th><td class="num">{{.Stats.BytesSent}}</td></tr>
<tr><th>frames received</th><td class="num">{{.Stats.FramesReceived}}</td><th>bytes received</th><td class="num">{{.Stats.BytesReceived}}</td></tr>
<tr><th>missing</th><td class="num">{{.Stats.FramesMissing}}</td><th>malformed</th><td class="num">{{.Stats.FramesMalformed}}</td></tr>
<tr><th>not members</th><td class="num">{{.Stats.FramesNotMember}}</td><th>send failures</th><td class="num">{{.Stats.SendFailures}}</td></tr>
</table>
{{end}}
<p style="color:#57606a">generated {{.Generated}}; reloads every {{.Refresh}} s</p>
</body></html>
`))

// keysTemplate lists KeyCounts; a count is over the truth by at most its
// error.
const keysTemplate = `{{define "keys"}}{{if .}}<table class="keys">
<tr><th>key</th><th>tokens</th><th>at most over by</th></tr>
{{range .}}<tr><td><code>{{.Key}}</code></td><td class="num">{{.Count}}</td><td class="num">{{.Error}}</td></tr>
{{end}}</table>{{else}}<p>none</p>{{end}}{{end}}`
