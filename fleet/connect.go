package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Deployment is how Redis is run.
type Deployment string

// The deployments a Connection reaches.
const (
	// Single: one server (or one address in front of a failover, such as
	// a virtual IP).
	Single Deployment = "single"
	// Cluster: a Redis Cluster; Addrs are some of its nodes. A budget's
	// keys share one hash slot.
	Cluster Deployment = "cluster"
	// Sentinel: a master watched by Redis Sentinel; Addrs are the
	// sentinels, MasterName the master's name. The client follows a
	// failover.
	Sentinel Deployment = "sentinel"
)

// Connection says how to reach Redis: the deployment, its addresses, the
// credentials and TLS. Build a client with [Connection.Client], or read one
// from the environment with [ConnectionFromEnv]. Keep passwords out of
// command lines and repositories: read them from a file or the
// environment.
type Connection struct {
	Deployment Deployment // [Single]
	Addrs      []string   // host:port; a cluster's seed nodes; the sentinels
	MasterName string     // Sentinel: the master's name

	Username string // ACL user ["": the default user]
	Password string
	// SentinelUsername and SentinelPassword authenticate to the sentinels,
	// when they require it.
	SentinelUsername, SentinelPassword string

	// TLS, if not nil, makes every connection TLS (Redis's tls-port).
	TLS *tls.Config

	// Timeout bounds a dial, a read and a write [DefaultTimeout; 1ms to
	// 1m]; use the budget's Config.Timeout.
	Timeout time.Duration
	// PoolSize is the connections per server [4; at most 1000]: a budget's
	// goroutine uses one at a time, a Watcher one more for its
	// subscription.
	PoolSize int
}

// Validate reports a Connection that cannot be used, every problem at
// once; each error wraps [ErrInvalidConfig] and names the field.
func (c Connection) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, invalidf(format, args...)) }
	switch c.Deployment {
	case "", Single:
		if len(c.Addrs) > 1 {
			bad("Addrs: %d addresses for one server; set the deployment to %q or %q", len(c.Addrs), Cluster, Sentinel)
		}
		if c.MasterName != "" {
			bad("MasterName: a master name is for a %q deployment", Sentinel)
		}
	case Cluster:
		if c.MasterName != "" {
			bad("MasterName: a master name is for a %q deployment", Sentinel)
		}
	case Sentinel:
		if c.MasterName == "" {
			bad("MasterName: a sentinel deployment needs the master's name")
		}
	default:
		bad("Deployment: unknown deployment %q (want %q, %q or %q)", c.Deployment, Single, Cluster, Sentinel)
	}
	if len(c.Addrs) == 0 {
		bad("Addrs: no Redis address")
	}
	if len(c.Addrs) > maxAddrs {
		bad("Addrs: %d addresses, at most %d allowed", len(c.Addrs), maxAddrs)
	}
	for _, a := range c.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" || len(a) > maxAddrLen {
			bad("Addrs: Redis address %.80q is not host:port", a)
		}
	}
	if c.Timeout != 0 && (c.Timeout < minTimeout || c.Timeout > maxTimeout) {
		bad("Connection.Timeout must be in [%v, %v] (0: %v), got %v", minTimeout, maxTimeout, DefaultTimeout, c.Timeout)
	}
	if c.PoolSize < 0 || c.PoolSize > maxPoolSize {
		bad("Connection.PoolSize must be in [0, %d] connections per server (0: %d), got %d", maxPoolSize, defaultPoolSize, c.PoolSize)
	}
	return errors.Join(errs...)
}

// Bounds of a Connection.
const (
	defaultPoolSize = 4
	maxPoolSize     = 1000
	maxAddrs        = 1000
	maxAddrLen      = 1000 // bytes of one host:port
)

// Client returns a client for the connection, with the options of
// [ClientOptions]: context deadlines bound the socket reads and writes,
// go-redis neither retries a command nor a dial on its own, and a failed
// dial is reported at once so that a budget rejoins within RejoinInterval.
// It is a *redis.Client, a *redis.ClusterClient or a (failover)
// *redis.Client by the deployment. Close it after the budgets and watchers
// that use it.
func (c Connection) Client() (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	pool := c.PoolSize
	if pool == 0 {
		pool = defaultPoolSize
	}
	o := &redis.UniversalOptions{
		Addrs:                    c.Addrs,
		MasterName:               c.MasterName,
		IsClusterMode:            c.Deployment == Cluster,
		Username:                 c.Username,
		Password:                 c.Password,
		SentinelUsername:         c.SentinelUsername,
		SentinelPassword:         c.SentinelPassword,
		TLSConfig:                c.TLS,
		DialTimeout:              2 * timeout,
		ReadTimeout:              timeout,
		WriteTimeout:             timeout,
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1,
		DialerRetries:            1,
		PoolSize:                 pool,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	o.Dialer = reportingDialer(&redis.Options{DialTimeout: o.DialTimeout, TLSConfig: c.TLS})
	return redis.NewUniversalClient(o), nil
}

// reportingDialer dials as go-redis does (with the TLS config and dial
// timeout of dial, read when it dials), except that a failed dial is
// reported on the connection's first read or write instead of as a dial
// error (see [ClientOptions]).
func reportingDialer(dial *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := *dial
		d.Dialer = nil
		c, err := redis.NewDialer(&d)(ctx, network, addr)
		if err != nil {
			return failedConn{err: &dialError{err}}, nil
		}
		return c, nil
	}
}

// The environment variables ConnectionFromEnv reads.
const (
	EnvAddr             = "STORMGUARD_REDIS_ADDR"              // host:port, comma-separated for a cluster or the sentinels [127.0.0.1:6379]
	EnvDeployment       = "STORMGUARD_REDIS_DEPLOYMENT"        // single, cluster or sentinel [single]
	EnvMaster           = "STORMGUARD_REDIS_MASTER"            // sentinel: the master's name
	EnvUser             = "STORMGUARD_REDIS_USER"              // ACL user
	EnvPassword         = "STORMGUARD_REDIS_PASSWORD"          // the password itself
	EnvPasswordFile     = "STORMGUARD_REDIS_PASSWORD_FILE"     // or a file holding it (first line)
	EnvSentinelUser     = "STORMGUARD_REDIS_SENTINEL_USER"     // sentinel: its ACL user
	EnvSentinelPassword = "STORMGUARD_REDIS_SENTINEL_PASSWORD" // sentinel: its password
	EnvSentinelPassFile = "STORMGUARD_REDIS_SENTINEL_PASSWORD_FILE"
	EnvTLS              = "STORMGUARD_REDIS_TLS"             // "1": TLS with the system's roots
	EnvTLSCA            = "STORMGUARD_REDIS_TLS_CA"          // PEM file of the CA that signed the server's certificate (implies TLS)
	EnvTLSCert          = "STORMGUARD_REDIS_TLS_CERT"        // PEM file of a client certificate (with EnvTLSKey)
	EnvTLSKey           = "STORMGUARD_REDIS_TLS_KEY"         // PEM file of its key
	EnvTLSServerName    = "STORMGUARD_REDIS_TLS_SERVER_NAME" // the name the server's certificate must hold [the address's host]
)

// ConnectionFromEnv reads a Connection from the environment (getenv, e.g.
// os.Getenv): the Env… variables. A password comes from a variable or from
// a file (its first line), never from a command line. Every problem is
// reported at once.
func ConnectionFromEnv(getenv func(string) string) (Connection, error) {
	var c Connection
	var errs []error
	addr := getenv(EnvAddr)
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Addrs = append(c.Addrs, a)
		}
	}
	c.Deployment = Deployment(getenv(EnvDeployment))
	c.MasterName = getenv(EnvMaster)
	c.Username = getenv(EnvUser)
	c.SentinelUsername = getenv(EnvSentinelUser)
	secret := func(v, file string) string {
		val, path := getenv(v), getenv(file)
		switch {
		case val != "" && path != "":
			errs = append(errs, fmt.Errorf("fleet: set %s or %s, not both", v, file))
		case path != "":
			pw, err := ReadPasswordFile(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("fleet: %s: %w", file, err))
			}
			return pw
		}
		return val
	}
	c.Password = secret(EnvPassword, EnvPasswordFile)
	c.SentinelPassword = secret(EnvSentinelPassword, EnvSentinelPassFile)
	tlsCfg, err := TLSConfig(getenv(EnvTLS) == "1", getenv(EnvTLSCA), getenv(EnvTLSCert), getenv(EnvTLSKey), getenv(EnvTLSServerName))
	if err != nil {
		errs = append(errs, err)
	}
	c.TLS = tlsCfg
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// TLSConfig returns the TLS configuration of a connection: nil (no TLS)
// unless on, or a CA file, or a client certificate is given. caFile is a
// PEM file of the certificate authorities the server's certificate must
// chain to (the system's roots when empty); certFile and keyFile a client
// certificate and its key (Redis's tls-auth-clients), both or neither;
// serverName the name the server's certificate must hold (the address's
// host when empty). TLS 1.2 at least.
func TLSConfig(on bool, caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	if !on && caFile == "" && certFile == "" && keyFile == "" {
		if serverName != "" {
			return nil, errors.New("fleet: a TLS server name without TLS")
		}
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := readBounded(caFile, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("fleet: TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fleet: TLS CA %s holds no PEM certificate", caFile)
		}
		c.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("fleet: TLS client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, errors.New("fleet: a TLS client certificate needs both the certificate and the key file")
	}
	return c, nil
}

// maxPasswordFile bounds what ReadPasswordFile reads.
const maxPasswordFile = 64 << 10

// ReadPasswordFile returns the first line of the regular file path (a
// trailing \r dropped): a password kept out of command lines and
// environments that others can read. It fails on a file that is not
// regular, larger than 64 KiB, or whose first line is empty.
func ReadPasswordFile(path string) (string, error) {
	b, err := readBounded(path, maxPasswordFile)
	if err != nil {
		return "", err
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("%s: the first line is empty", path)
	}
	return pw, nil
}

// readBounded reads the regular file path, failing if it holds more than
// limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: longer than %d bytes", path, limit)
	}
	return b, nil
}
