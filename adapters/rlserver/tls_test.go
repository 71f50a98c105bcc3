package rlserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// testCA signs certificates for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate for name (a server's for 127.0.0.1, or a
// client's) and returns its PEM certificate and key.
func (ca *testCA) issue(t *testing.T, name string, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeTLSFile(t *testing.T, path string, b []byte) {
	t.Helper()
	// Write beside it and rename, as a Secret's volume swaps its files.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Both listeners serve TLS and ask for client certificates: a caller with
// a certificate the client CA signed is answered over HTTPS and gRPC, one
// without is refused at the handshake, and a rotated server certificate
// is served on the next connections without a restart.
func TestTLSWithClientCertificates(t *testing.T) {
	ca := newTestCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	cert, key := ca.issue(t, "server one", 2)
	writeTLSFile(t, certFile, cert)
	writeTLSFile(t, keyFile, key)
	writeTLSFile(t, caFile, ca.pem)
	c, err := ParseFlags([]string{"-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0",
		"-tls-cert", certFile, "-tls-key", keyFile, "-client-ca", caFile}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs, done := make(chan [2]string, 1), make(chan error, 1)
	go func() { done <- Run(ctx, c, quiet, func(h, g string) { addrs <- [2]string{h, g} }, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var httpAddr, grpcAddr string
	select {
	case a := <-addrs:
		httpAddr, grpcAddr = a[0], a[1]
	case err := <-done:
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	clientCertPEM, clientKeyPEM := ca.issue(t, "caller", 3)
	clientCert, err := tls.X509KeyPair(clientCertPEM, clientKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}
	without := &tls.Config{RootCAs: roots}

	get := func(cfg *tls.Config) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		client := &http.Client{Timeout: 5 * time.Second, Transport: tr}
		return client.Get("https://" + httpAddr + "/allow?key=k")
	}
	resp, err := get(withCert)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.PeerCertificates[0].Subject.CommonName != "server one" {
		t.Fatalf("HTTPS with a client certificate: %d", resp.StatusCode)
	}
	if resp, err := get(without); err == nil {
		resp.Body.Close()
		t.Fatal("HTTPS without a client certificate was answered")
	}
	plainTransport := &http.Transport{DisableKeepAlives: true}
	defer plainTransport.CloseIdleConnections()
	plain := &http.Client{Timeout: 5 * time.Second, Transport: plainTransport}
	if resp, err := plain.Get("http://" + httpAddr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP was answered on the TLS listener")
		}
	}

	call := func(cfg *tls.Config) error {
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "edge",
			Descriptors: []*rlv3.RateLimitDescriptor{descriptor("user", "u")}})
		return err
	}
	if err := call(withCert); err != nil {
		t.Fatalf("gRPC with a client certificate: %v", err)
	}
	if err := call(without); err == nil {
		t.Fatal("gRPC without a client certificate was answered")
	}

	// Rotate the server's certificate: new connections get it.
	cert, key = ca.issue(t, "server two", 4)
	writeTLSFile(t, keyFile, key)
	writeTLSFile(t, certFile, cert)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := get(withCert)
		if err == nil {
			resp.Body.Close()
			if resp.TLS.PeerCertificates[0].Subject.CommonName == "server two" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was not served within 10 s (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := call(withCert); err != nil {
		t.Fatalf("gRPC after the rotation: %v", err)
	}
}

// The TLS flags are checked together.
func TestTLSFlags(t *testing.T) {
	for _, args := range [][]string{{"-tls-cert", "a"}, {"-tls-key", "b"}, {"-client-ca", "c"}} {
		if _, err := ParseFlags(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
	c, err := ParseFlags([]string{"-tls-cert", "/nonexistent", "-tls-key", "/nonexistent", "-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), c, quiet, nil, nil); err == nil {
		t.Fatal("a server started with certificate files that do not exist")
	}
}
