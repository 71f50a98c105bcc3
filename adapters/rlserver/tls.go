package rlserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// tlsFiles serves TLS from certificate files that may be rotated under a
// running server (cert-manager, a mounted Secret): every handshake checks
// the files' modification times and sizes, at most once a second, and a
// change is loaded for the handshakes after it. A change that does not
// load is logged and the last good files stay.
type tlsFiles struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   [3]fileStamp
	cert    *tls.Certificate
	clients *x509.CertPool // nil: no client certificates asked for
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// newTLSFiles loads the files once, so that a bad file is an error at
// start.
func newTLSFiles(certFile, keyFile, caFile string, log *slog.Logger) (*tlsFiles, error) {
	f := &tlsFiles{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log}
	stamp, err := f.stamps()
	if err != nil {
		return nil, err
	}
	if err := f.load(stamp); err != nil {
		return nil, err
	}
	return f, nil
}

// config is the tls.Config of a listener: TLS 1.2 at least, the current
// certificate on every handshake, and client certificates verified
// against the current CA when there is one. nextProtos are the
// listener's ALPN protocols.
func (f *tlsFiles) config(nextProtos ...string) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, clients := f.current()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.Certificates = []tls.Certificate{*cert}
		if clients != nil {
			c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, clients
		}
		return c, nil
	}
	return base
}

// current is the certificate and client CAs to use now, reloaded first if
// the files changed.
func (f *tlsFiles) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.checked) >= time.Second {
		f.checked = now
		stamp, err := f.stamps()
		if err == nil && stamp != f.stamp {
			err = f.loadLocked(stamp)
			if err == nil {
				f.log.Info("TLS files reloaded", "cert", f.certFile, "client-ca", f.caFile)
			}
		}
		if err != nil {
			f.log.Error("the TLS files could not be reloaded; the last good ones stay", "err", err)
		}
	}
	return f.cert, f.clients
}

func (f *tlsFiles) stamps() ([3]fileStamp, error) {
	var out [3]fileStamp
	for i, name := range []string{f.certFile, f.keyFile, f.caFile} {
		if name == "" {
			continue
		}
		st, err := os.Stat(name)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{st.ModTime(), st.Size()}
	}
	return out, nil
}

func (f *tlsFiles) load(stamp [3]fileStamp) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadLocked(stamp)
}

func (f *tlsFiles) loadLocked(stamp [3]fileStamp) error {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("-tls-cert, -tls-key: %w", err)
	}
	var clients *x509.CertPool
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return fmt.Errorf("-client-ca: %w", err)
		}
		clients = x509.NewCertPool()
		if !clients.AppendCertsFromPEM(pem) {
			return errors.New("-client-ca: no PEM certificate in " + f.caFile)
		}
	}
	f.cert, f.clients, f.stamp = &cert, clients, stamp
	return nil
}
