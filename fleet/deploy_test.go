package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/killswitch"
)

// Redis as users run it: a cluster, a master watched by Sentinel, TLS and
// ACL users, each through Connection and redis.UniversalClient.

// connect builds the connection's client, closed when the test ends.
func connect(t *testing.T, c Connection) redis.UniversalClient {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = hostspeed.Scale(200 * time.Millisecond)
	}
	rdb, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// joinAll joins n budgets of key over rdb.
func joinAll(t *testing.T, rdb redis.UniversalClient, key string, n int) []*Budget {
	t.Helper()
	var bs []*Budget
	for i := range n {
		logger, _ := testLogger()
		b, err := New(context.Background(), rdb, Config{Key: key, Spec: aws2026(t), ID: fmt.Sprint(key, "-", i), Logger: logger,
			Timeout: hostspeed.Scale(200 * time.Millisecond), MaxWait: hostspeed.Scale(5 * time.Millisecond), RejoinInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bs = append(bs, b)
	}
	return bs
}

// fill puts tokens into key's pool over rdb, as a filler process.
func fill(t *testing.T, rdb redis.UniversalClient, key string, tokens int) {
	t.Helper()
	logger, _ := testLogger()
	b, err := New(context.Background(), rdb, Config{Key: key, Spec: aws2026(t), ID: "filler", Logger: logger, Timeout: redisTimeout()})
	if err != nil {
		t.Fatal(err)
	}
	for range tokens {
		b.EndAt(time.Time{}, budget.Success, budget.Ticket{})
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// awaitRejoin waits until every budget is in fleet mode and returns how
// long that took after since.
func awaitRejoin(t *testing.T, bs []*Budget, since time.Time, d time.Duration) time.Duration {
	t.Helper()
	for _, b := range bs {
		waitFor(t, d, "a rejoin", func() bool { return b.Mode() == ModeFleet && b.Stats().LastSync.After(since) })
	}
	return time.Since(since)
}

// TestCluster: budgets on a three-master Redis Cluster (their keys in
// different slots), then a failover of the master that holds one budget:
// its replica takes over (cluster-node-timeout 1s), the processes rejoin,
// the state from the other server starts empty, and the fleet never spends
// more than it earned.
func TestCluster(t *testing.T) {
	leakcheck.Check(t)
	c := redistest.StartCluster(t, 3)
	rdb := connect(t, Connection{Deployment: Cluster, Addrs: c.Addrs()})
	// Keys on every master.
	owners := map[string]bool{}
	for i := 0; len(owners) < 3 && i < 100; i++ {
		key := fmt.Sprint("k", i)
		m := c.MasterOf("stormguard:budget:{" + key + "}")
		if owners[m.Addr()] {
			continue
		}
		owners[m.Addr()] = true
		bs := joinAll(t, rdb, key, 2)
		fill(t, rdb, key, 100)
		if _, ok := bs[0].RetryAt(time.Now(), budget.Transient); !ok {
			t.Errorf("budget %s on %s: retry refused", key, m.Addr())
		}
		if lv, err := Peek(context.Background(), rdb, key); err != nil || lv.Processes != 2 || lv.Pool != 86 {
			t.Errorf("budget %s on %s: %+v %v", key, m.Addr(), lv, err)
		}
	}
	if len(owners) != 3 {
		t.Fatalf("budgets on %d masters, want 3", len(owners))
	}

	// Failover.
	const key = "failover"
	master := c.MasterOf("stormguard:budget:{" + key + "}")
	replica := c.AddReplica(master)
	bs := joinAll(t, rdb, key, 4)
	fill(t, rdb, key, 500)
	r := startRun(t, 500, stormWork, bs...)
	time.Sleep(hostspeed.Scale(300 * time.Millisecond))
	master.Kill()
	killed := time.Now()
	waitFor(t, 20*time.Second, "the replica to take over", func() bool {
		role, _ := replica.Do("ROLE")
		return strings.HasPrefix(role, "master")
	})
	promoted := time.Since(killed)
	c.WaitOK()
	took := awaitRejoin(t, bs, killed, 20*time.Second)
	t.Logf("the replica took over %v after the master died; every process rejoined %v after", promoted, took)
	time.Sleep(hostspeed.Scale(200 * time.Millisecond))
	r.end()
}

// TestSentinel: budgets and a kill-switch watcher through Sentinel; the
// master dies, the sentinels promote the replica, the processes rejoin, the
// pool of the promoted copy is emptied (another server wrote it), the dials
// keep their value, and the fleet never spends more than it earned.
func TestSentinel(t *testing.T) {
	leakcheck.Check(t)
	set := redistest.StartSentinel(t)
	rdb := connect(t, Connection{Deployment: Sentinel, Addrs: set.Addrs(), MasterName: set.Name})
	const key = "sentinel"
	bs := joinAll(t, rdb, key, 4)
	fill(t, rdb, key, 500)
	if _, err := SetDials(t.Context(), rdb, "sentinel", DialsChange{ShedFraction: ptr(0.2)}); err != nil {
		t.Fatal(err)
	}
	d := new(killswitch.Dials)
	logger, _ := testLogger()
	w, err := Watch(rdb, "sentinel", d, WatchConfig{PollInterval: 100 * time.Millisecond, Timeout: redisTimeout(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	waitFor(t, hostspeed.Scale(2*time.Second), "the dials", func() bool { return d.ShedFraction() == 0.2 })
	waitFor(t, hostspeed.Scale(2*time.Second), "the replica to hold the dials", func() bool {
		return set.Replica.MustDo("HGET", dialsKey("sentinel"), "shed_ppm") == "200000"
	})
	r := startRun(t, 500, stormWork, bs...)
	time.Sleep(hostspeed.Scale(300 * time.Millisecond))
	set.Master.Kill()
	killed := time.Now()
	waitFor(t, 20*time.Second, "the sentinels to promote the replica", func() bool {
		a, _ := set.MasterAddr()
		return a == set.Replica.Addr()
	})
	promoted := time.Since(killed)
	took := awaitRejoin(t, bs, killed, 20*time.Second)
	t.Logf("the sentinels promoted the replica %v after the master died; every process rejoined %v after", promoted, took)
	// A change through the new master reaches the watcher.
	if _, err := SetDials(t.Context(), rdb, "sentinel", DialsChange{ShedFraction: ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(3*time.Second), "the change through the new master", func() bool { return d.ShedFraction() == 0 })
	time.Sleep(hostspeed.Scale(200 * time.Millisecond))
	r.end()
}

// fleetACL is the ACL a fleet's Redis user needs (docs/fleet.md states it):
// the keys and channels named stormguard:*, the commands the scripts call,
// and those the clients send themselves.
var fleetACL = []string{"resetkeys", "~stormguard:*", "resetchannels", "&stormguard:*", "-@all",
	"+evalsha", "+eval", "+ping", "+hello", "+hmget", "+subscribe", "+unsubscribe",
	"+time", "+info", "+type", "+hget", "+hset", "+hdel", "+hkeys", "+hincrby", "+hexists",
	"+zadd", "+zrem", "+zcard", "+zrangebyscore", "+zremrangebyscore", "+zpopmin",
	"+del", "+pexpire", "+publish"}

// TestTLSAndACL: a budget, Peek, SetDials and a watcher over TLS (the server
// asks for a client certificate; the CA and the certificate are read from
// files, as `stormguard fleet` reads them) as an ACL user with just the
// fleet's permissions; a user without them is refused with a clear error.
func TestTLSAndACL(t *testing.T) {
	leakcheck.Check(t)
	certs := redistest.NewCerts(t)
	srv := redistest.StartTLS(t, certs, true)
	srv.MustDo(append([]string{"ACL", "SETUSER", "fleet", "on", ">fleet-pw"}, fleetACL...)...)
	srv.MustDo("ACL", "SETUSER", "reader", "on", ">reader-pw", "~*", "+@read", "+hello", "+ping", "+evalsha", "+eval")
	tlsCfg, err := TLSConfig(false, certs.CAFile, certs.ClientCert, certs.ClientKey, "")
	if err != nil {
		t.Fatal(err)
	}
	rdb := connect(t, Connection{Addrs: []string{srv.TLSAddr()}, TLS: tlsCfg, Username: "fleet", Password: "fleet-pw"})
	bs := joinAll(t, rdb, "tls", 2)
	fill(t, rdb, "tls", 100)
	if _, ok := bs[0].RetryAt(time.Now(), budget.Transient); !ok {
		t.Error("retry refused over TLS")
	}
	if lv, err := Peek(context.Background(), rdb, "tls"); err != nil || lv.Pool != 86 {
		t.Errorf("Peek over TLS: %+v %v", lv, err)
	}
	d := new(killswitch.Dials)
	logger, _ := testLogger()
	w, err := Watch(rdb, "tls", d, WatchConfig{Timeout: redisTimeout(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	waitFor(t, hostspeed.Scale(2*time.Second), "the watcher", func() bool { return w.Stats().Connected })
	time.Sleep(hostspeed.Scale(50 * time.Millisecond)) // subscribed
	if _, err := SetDials(t.Context(), rdb, "tls", DialsChange{RetriesOff: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(time.Second), "the change", func() bool { return d.RetriesDisabled() })

	// A user that may not write: the budget falls back, saying why.
	reader := connect(t, Connection{Addrs: []string{srv.TLSAddr()}, TLS: tlsCfg, Username: "reader", Password: "reader-pw"})
	b, logs := func() (*Budget, *syncBuffer) {
		logger, logs := testLogger()
		b, err := New(context.Background(), reader, Config{Key: "tls", Spec: aws2026(t), Logger: logger, Timeout: redisTimeout()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b, logs
	}()
	if b.Mode() != ModeFallback || !strings.Contains(logs.String(), "the Redis user lacks the fleet's permissions") {
		t.Errorf("a user without the fleet's permissions: mode %v, log:\n%s", b.Mode(), logs)
	}
	// Without the CA, the server's certificate is not trusted.
	bad := connect(t, Connection{Addrs: []string{srv.TLSAddr()}, TLS: &tls.Config{MinVersion: tls.VersionTLS12}, Username: "fleet", Password: "fleet-pw"})
	if err := bad.Ping(t.Context()).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a server certificate from an unknown CA: %v", err)
	}
}

func TestConnectionErrors(t *testing.T) {
	for _, c := range []struct {
		c    Connection
		want string
	}{
		{Connection{}, "no Redis address"},
		{Connection{Addrs: []string{"a:1", "b:2"}}, "2 addresses for one server"},
		{Connection{Addrs: []string{"nohost"}}, `"nohost" is not host:port`},
		{Connection{Deployment: Sentinel, Addrs: []string{"a:1"}}, "needs the master's name"},
		{Connection{Deployment: Cluster, Addrs: []string{"a:1"}, MasterName: "m"}, "a master name is for"},
		{Connection{Deployment: "mesh", Addrs: []string{"a:1"}}, `unknown deployment "mesh"`},
	} {
		if _, err := c.c.Client(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.c, err, c.want)
		}
	}
	env := map[string]string{EnvAddr: "h1:1, h2:2", EnvDeployment: "sentinel", EnvMaster: "m", EnvUser: "u", EnvPassword: "p"}
	c, err := ConnectionFromEnv(func(k string) string { return env[k] })
	if err != nil || fmt.Sprint(c.Addrs) != "[h1:1 h2:2]" || c.Deployment != Sentinel || c.MasterName != "m" || c.Username != "u" || c.Password != "p" || c.TLS != nil {
		t.Errorf("from the environment: %+v %v", c, err)
	}
	env = map[string]string{EnvPassword: "p", EnvPasswordFile: "/nonexistent", EnvTLSCert: "c.pem"}
	_, err = ConnectionFromEnv(func(k string) string { return env[k] })
	for _, want := range []string{"not both", "both the certificate and the key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad environment: %v lacks %q", err, want)
		}
	}
	if _, err := TLSConfig(false, "", "", "", "name"); err == nil {
		t.Error("a server name without TLS accepted")
	}
	if err := roundTripError("k", redisErr("NOPERM this user has no permissions to access one of the keys")); !errors.Is(err, ErrNoPermission) {
		t.Errorf("NOPERM: %v", err)
	}
}

// redisErr is an error reply of Redis.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}
