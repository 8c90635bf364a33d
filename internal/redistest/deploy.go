package redistest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Certs are a certificate authority and, signed by it, a server certificate
// for 127.0.0.1 and localhost and a client certificate, as PEM files in a
// test's temporary directory.
type Certs struct {
	CAFile                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	pool                  *x509.CertPool
}

// NewCerts generates the certificates (ECDSA P-256, valid for a day).
func NewCerts(tb testing.TB) *Certs {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	c := &Certs{CAFile: filepath.Join(dir, "ca.pem"), pool: x509.NewCertPool()}
	c.pool.AddCert(ca)
	writePEM(tb, c.CAFile, "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			tb.Fatal(err)
		}
		cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(tb, cert, "CERTIFICATE", der)
		writePEM(tb, keyFile, "EC PRIVATE KEY", kder)
		return cert, keyFile
	}
	c.ServerCert, c.ServerKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	c.ClientCert, c.ClientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return c
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	var b bytes.Buffer
	if err := pem.Encode(&b, &pem.Block{Type: typ, Bytes: der}); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// ClientTLS returns a TLS configuration that trusts the CA and presents the
// client certificate.
func (c *Certs) ClientTLS(tb testing.TB) *tls.Config {
	tb.Helper()
	cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		tb.Fatal(err)
	}
	return &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// StartTLS starts a redis-server that also listens for TLS on another port
// of 127.0.0.1 (tls-port), with the certificates of c; clients must present
// a certificate signed by the CA when clientAuth is true. The plain port
// stays open for the test's own administration ([Server.Do]); [Server.TLSAddr]
// is the address for the code under test.
func StartTLS(tb testing.TB, c *Certs, clientAuth bool, args ...string) *Server {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	auth := "no"
	if clientAuth {
		auth = "yes"
	}
	s := Start(tb, append([]string{"--tls-port", strconv.Itoa(port), "--tls-cert-file", c.ServerCert, "--tls-key-file", c.ServerKey,
		"--tls-ca-cert-file", c.CAFile, "--tls-auth-clients", auth}, args...)...)
	s.tlsPort = port
	return s
}

// TLSAddr returns the server's TLS address, "127.0.0.1:PORT" ("" for a
// server started without TLS).
func (s *Server) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// ClusterNodes is a Redis Cluster on 127.0.0.1 that a test owns.
type ClusterNodes struct {
	tb    testing.TB
	Nodes []*Server // the masters first, in the order they were created
}

// StartCluster starts masters redis-servers with --cluster-enabled yes,
// joins them with redis-cli --cluster create (the slots split evenly), and
// waits until every node reports the cluster ok. A node that fails is
// noticed after 1 s (cluster-node-timeout). It skips or fails the test as
// [Start] does when redis-server or redis-cli is missing.
func StartCluster(tb testing.TB, masters int) *ClusterNodes {
	tb.Helper()
	cli := requireTool(tb, "redis-cli")
	c := &ClusterNodes{tb: tb}
	var addrs []string
	for range masters {
		s := c.startNode()
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK()
	return c
}

// startNode starts one cluster-enabled node, its bus on a free port.
func (c *ClusterNodes) startNode() *Server {
	c.tb.Helper()
	bus, err := freePort()
	if err != nil {
		c.tb.Fatal(err)
	}
	s := Start(c.tb, "--cluster-enabled", "yes", "--cluster-node-timeout", "1000", "--cluster-port", strconv.Itoa(bus))
	s.busPort = bus
	c.Nodes = append(c.Nodes, s)
	return s
}

// Addrs returns the addresses of the nodes.
func (c *ClusterNodes) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// WaitOK waits until every running node reports cluster_state:ok with all
// slots served.
func (c *ClusterNodes) WaitOK() {
	c.tb.Helper()
	deadline := time.Now().Add(3 * startTimeout)
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		for {
			info, err := n.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") {
				break
			}
			if time.Now().After(deadline) {
				c.tb.Fatalf("redistest: cluster node %s not ok: %v\n%s", n.Addr(), err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// MasterOf returns the master node that serves the hash slot of key: the
// one that answers a read of the key without a MOVED redirection.
func (c *ClusterNodes) MasterOf(key string) *Server {
	c.tb.Helper()
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		if role, err := n.Do("ROLE"); err != nil || !strings.HasPrefix(role, "master") {
			continue
		}
		if _, err := n.Do("EXISTS", key); err == nil {
			return n
		}
	}
	c.tb.Fatalf("redistest: no master serves the slot of %q", key)
	return nil
}

// AddReplica starts a node, joins it to the cluster and makes it a replica
// of master; it returns once the replica is in sync.
func (c *ClusterNodes) AddReplica(master *Server) *Server {
	c.tb.Helper()
	r := c.startNode()
	host, port, _ := net.SplitHostPort(master.Addr())
	r.MustDo("CLUSTER", "MEET", host, port, strconv.Itoa(master.busPort))
	id := strings.TrimSpace(master.MustDo("CLUSTER", "MYID"))
	deadline := time.Now().Add(startTimeout)
	for {
		// The replica must know the master before it can replicate it.
		if _, err := r.Do("CLUSTER", "REPLICATE", id); err == nil {
			break
		} else if time.Now().After(deadline) {
			c.tb.Fatalf("redistest: CLUSTER REPLICATE: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.WaitReplicating()
	return r
}

// SentinelSet is a master, a replica and three sentinels watching them, on
// 127.0.0.1, that a test owns.
type SentinelSet struct {
	Master, Replica *Server
	Sentinels       []*Server
	Name            string // the master's name for the sentinels
}

// StartSentinel starts a master, a replica and three sentinels (quorum 2;
// a master unreachable for 500 ms is down) and waits until every sentinel
// knows the replica and the two other sentinels. args are passed on to the
// master and the replica.
func StartSentinel(tb testing.TB, args ...string) *SentinelSet {
	tb.Helper()
	set := &SentinelSet{Name: "stormguard"}
	set.Master = Start(tb, args...)
	set.Replica = StartReplica(tb, set.Master, args...)
	host, port, _ := net.SplitHostPort(set.Master.Addr())
	for range 3 {
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %[1]s 500\nsentinel failover-timeout %[1]s 3000\nsentinel parallel-syncs %[1]s 1\n", set.Name, host, port)
		if pw := set.Master.password(); pw != "" {
			text += fmt.Sprintf("sentinel auth-pass %s %s\n", set.Name, pw)
		}
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		s := startSentinel(tb, conf, dir)
		set.Sentinels = append(set.Sentinels, s)
	}
	deadline := time.Now().Add(3 * startTimeout)
	for _, s := range set.Sentinels {
		for {
			r, err1 := s.Do("SENTINEL", "REPLICAS", set.Name)
			o, err2 := s.Do("SENTINEL", "SENTINELS", set.Name)
			_, rport, _ := net.SplitHostPort(set.Replica.Addr())
			if err1 == nil && err2 == nil && countLines(r, rport) >= 1 && countLines(o, "name") >= 2 {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: sentinel %s does not know the replica and the others: %v %v\n%s\n%s", s.Addr(), err1, err2, r, o)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return set
}

// Addrs returns the sentinels' addresses.
func (set *SentinelSet) Addrs() []string {
	var out []string
	for _, s := range set.Sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// MasterAddr asks a sentinel for the master's address now.
func (set *SentinelSet) MasterAddr() (string, error) {
	for _, s := range set.Sentinels {
		v, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", set.Name)
		if err != nil {
			continue
		}
		hp := strings.Split(v, "\n")
		if len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
	}
	return "", fmt.Errorf("redistest: no sentinel knows master %s", set.Name)
}

// startSentinel starts redis-server in sentinel mode with the configuration
// file conf (which the sentinel rewrites).
func startSentinel(tb testing.TB, conf, dir string) *Server {
	tb.Helper()
	bin, ok := requireBinary(tb, os.Getenv("CI") == "true", exec.LookPath)
	if !ok {
		return nil
	}
	s := &Server{tb: tb, bin: bin, dir: dir, conf: conf}
	s.launch()
	return s
}

// requireTool finds a tool of the Redis package (redis-cli), or skips the
// test (fails it when CI=true).
func requireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("redistest: %s is not installed (apt-get install redis-tools) (CI=true: the tests against Redis must run, not skip)", name)
	} else {
		tb.Skipf("redistest: %s is not installed (apt-get install redis-tools); skipping", name)
	}
	return ""
}

// countLines counts the lines of text equal to line.
func countLines(text, line string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			n++
		}
	}
	return n
}
