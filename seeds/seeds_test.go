package seeds

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestStatic(t *testing.T) {
	got, err := Static{"10.0.0.5:7946", "[fd00::1]:7946", "node-a.internal:7946"}.Seeds(context.Background())
	if err != nil || len(got) != 3 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []Static{nil, {"10.0.0.5"}, {":7946"}, {"host:0"}, {"host:99999"}, {"host:http"}} {
		if _, err := bad.Seeds(context.Background()); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

type fakeResolver struct {
	addrs []string
	err   error
	calls atomic.Int32
}

func (f *fakeResolver) LookupHost(context.Context, string) ([]string, error) {
	f.calls.Add(1)
	return f.addrs, f.err
}

func TestDNSAsksAfreshEveryTime(t *testing.T) {
	r := &fakeResolver{addrs: []string{"10.0.0.2", "10.0.0.1", "10.0.0.2", "fd00::3"}}
	d := DNS{Host: "svc", Port: 7946, Resolver: r}
	got, err := d.Seeds(context.Background())
	want := []string{"10.0.0.1:7946", "10.0.0.2:7946", "[fd00::3]:7946"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%v %v, want %v", got, err, want)
	}
	r.addrs = []string{"10.0.0.9"}
	got, _ = d.Seeds(context.Background())
	if !slices.Equal(got, []string{"10.0.0.9:7946"}) || r.calls.Load() != 2 {
		t.Fatalf("second call %v after %d lookups: not asked afresh", got, r.calls.Load())
	}
	for _, bad := range []DNS{{Port: 1}, {Host: "x"}, {Host: "x", Port: 70000}} {
		if _, err := bad.Seeds(context.Background()); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	r.err = errors.New("boom")
	if _, err := d.Seeds(context.Background()); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("resolver error: %v", err)
	}
}

func TestFallback(t *testing.T) {
	failing := DNS{Host: "svc", Port: 1, Resolver: &fakeResolver{err: errors.New("nxdomain")}}
	got, err := Fallback{failing, nil, Static{"10.0.0.5:7946"}}.Seeds(context.Background())
	if err != nil || !slices.Equal(got, []string{"10.0.0.5:7946"}) {
		t.Fatalf("%v %v", got, err)
	}
	_, err = Fallback{failing, DNS{Host: "svc", Port: 1, Resolver: &fakeResolver{}}}.Seeds(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nxdomain") || !errors.Is(err, ErrNoSeeds) {
		t.Fatalf("all failing: %v", err)
	}
}

// TestDNSAgainstALocalServer resolves through a real DNS server on
// loopback, speaking the wire protocol over UDP.
func TestDNSAgainstALocalServer(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go serveDNS(pc, map[uint16][][]byte{
		1:  {{10, 1, 0, 7}, {10, 1, 0, 8}},  // A
		28: {net.ParseIP("fd00::9").To16()}, // AAAA
	})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := DNS{Host: "gopherpace-headless.default.svc.cluster.local", Port: 7946, Resolver: r}.Seeds(ctx)
	want := []string{"10.1.0.7:7946", "10.1.0.8:7946", "[fd00::9]:7946"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%v %v, want %v", got, err, want)
	}
}

// serveDNS answers every query with the records of its type, until pc closes.
func serveDNS(pc net.PacketConn, records map[uint16][][]byte) {
	buf := make([]byte, 512)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		q := buf[:n]
		if n < 12 {
			continue
		}
		// Skip the question name to find its type.
		i := 12
		for i < n && q[i] != 0 {
			i += int(q[i]) + 1
		}
		if i+5 > n {
			continue
		}
		qtype := binary.BigEndian.Uint16(q[i+1:])
		question := q[12 : i+5]
		answers := records[qtype]
		resp := append([]byte(nil), q[:2]...)         // id
		resp = append(resp, 0x81, 0x80)               // response, recursion available
		resp = binary.BigEndian.AppendUint16(resp, 1) // questions
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(answers)))
		resp = append(resp, 0, 0, 0, 0) // authority, additional
		resp = append(resp, question...)
		for _, rdata := range answers {
			resp = append(resp, 0xc0, 12) // name: pointer to the question
			resp = binary.BigEndian.AppendUint16(resp, qtype)
			resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
			resp = binary.BigEndian.AppendUint32(resp, 5) // TTL
			resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
			resp = append(resp, rdata...)
		}
		pc.WriteTo(resp, addr)
	}
}
