package grpcx_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/leakcheck"
)

// peerName returns the common name of the client certificate a call came
// with over TLS (peer.FromContext), or "" when it has none.
func peerName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return ""
	}
	return ti.State.PeerCertificates[0].Subject.CommonName
}

// pki is a certificate authority made for one test, and what it signed: a
// server certificate for 127.0.0.1 and a client certificate for each name.
type pki struct {
	pool    *x509.CertPool
	server  tls.Certificate
	clients map[string]tls.Certificate
}

// newPKI makes a CA (ECDSA P-256) and signs a server certificate for
// 127.0.0.1 and a client certificate for each of names.
func newPKI(t *testing.T, names ...string) pki {
	t.Helper()
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "stormguard test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{pool: x509.NewCertPool(), clients: map[string]tls.Certificate{}}
	p.pool.AddCert(ca)
	serial := int64(2)
	sign := func(tmpl *x509.Certificate) tls.Certificate {
		key := newKey(t)
		tmpl.SerialNumber = big.NewInt(serial)
		serial++
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p.server = sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	for _, name := range names {
		p.clients[name] = sign(&x509.Certificate{
			Subject:     pkix.Name{CommonName: name},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
	}
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// serverCreds is mutual TLS on the server: its certificate, and a client
// certificate signed by the CA required of every caller.
func (p pki) serverCreds() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{p.server},
		ClientCAs:    p.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}))
}

// dialAs connects to addr over TLS with the client certificate of name, on
// a connection of its own; the test's cleanup closes it.
func (p pki) dialAs(t *testing.T, addr, name string) healthpb.HealthClient {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{
		RootCAs:      p.pool,
		Certificates: []tls.Certificate{p.clients[name]},
		ServerName:   "127.0.0.1",
		MinVersion:   tls.VersionTLS12,
	})
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// Under mutual TLS, the default scope tells callers apart by their client
// certificate: a call with the key of a call in service, on the same
// method, from a client with another certificate runs its own request,
// even with the same authorization metadata; from the same certificate
// (on another connection) it joins. Each client is on a connection of its
// own, so the connection is not what tells them apart.
func TestServerSupersedeClientCertificate(t *testing.T) {
	tests := []struct {
		name       string
		a, b       string   // the callers' certificates
		md         []string // extra metadata of both calls
		wantJoined bool
	}{
		{"the same certificate", "ann", "ann", nil, true},
		{"the same certificate and authorization", "ann", "ann", []string{"authorization", "Bearer svc"}, true},
		{"another certificate", "ann", "bob", nil, false},
		{"another certificate, the same authorization", "ann", "bob", []string{"authorization", "Bearer svc"}, false},
	}
	p := newPKI(t, "ann", "bob")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			tr := newTransfer()
			sg, err := grpcx.NewServer(grpcx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{}}})
			if err != nil {
				t.Fatal(err)
			}
			b := newBackend(t, append(sg.ServerOptions(), p.serverCreds()), tr.step())
			ca, cb := p.dialAs(t, b.addr, tt.a), p.dialAs(t, b.addr, tt.b)
			pa := keyedCheck(ca, "k", tt.md...)
			waitFor(t, "the first running", func() bool { return tr.runs.Load() == 1 })
			pb := keyedCheck(cb, "k", tt.md...)
			waitFor(t, "the second joining or running", func() bool {
				return sg.Stats().Joining == 1 || tr.runs.Load() == 2
			})
			close(tr.slow)
			a, s := <-pa, <-pb
			if a.err != nil || s.err != nil {
				t.Fatalf("first: %v; second: %v", a.err, s.err)
			}
			if got := first(a.header, "x-peer"); got != tt.a {
				t.Errorf("first: served for peer %q; want %q (mutual TLS)", got, tt.a)
			}
			joined := first(s.trailer, grpcx.KeySuperseded) == "joined"
			gotRun, gotPeer := first(s.header, "x-run"), first(s.header, "x-peer")
			wantRun, wantPeer := "2", tt.b // its own run
			if tt.wantJoined {
				wantRun, wantPeer = "1", tt.a // the first's reply
			}
			if joined != tt.wantJoined || gotRun != wantRun || gotPeer != wantPeer {
				t.Errorf("second: joined %v, run %s for peer %q; want joined %v, run %s for peer %q",
					joined, gotRun, gotPeer, tt.wantJoined, wantRun, wantPeer)
			}
			if n, want := tr.runs.Load(), map[bool]int32{true: 1, false: 2}[tt.wantJoined]; n != want {
				t.Errorf("the call ran %d times; want %d", n, want)
			}
			checkServerBooks(t, sg.Stats())
		})
	}
}
