package fleet

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/killswitch"
)

// The configuration errors: every field of Config, WatchConfig and
// Connection out of its bounds is refused with an error that names it, and
// ClientOptions panics on a timeout out of its bounds. None of these tests
// reaches Redis (127.0.0.1:1 answers nothing).

const invalid = "fleet: invalid config: "

func TestConfigErrors(t *testing.T) {
	bucket := budget.Spec{Kind: budget.KindTokenBucket}
	window := budget.Spec{Kind: budget.KindWindow, Ratio: 0.1}
	key := func(c Config) Config { c.Key = "k"; c.Spec = bucket; return c }
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no key", Config{Spec: bucket}, invalid + "key must not be empty"},
		{"long key", Config{Key: strings.Repeat("k", 100_000), Spec: bucket}, invalid + "key is 100000 bytes long, at most 200 allowed"},
		{"key of 201 bytes", Config{Key: strings.Repeat("k", 201), Spec: bucket}, invalid + "key is 201 bytes long, at most 200 allowed"},
		{"brace", Config{Key: "a{b}", Spec: bucket}, invalid + `key "a{b}" must hold no white space, control character, '{' or '}'`},
		{"space", Config{Key: "a b", Spec: bucket}, invalid + `key "a b" must hold no white space, control character, '{' or '}'`},
		{"control", Config{Key: "a\x00b", Spec: bucket}, invalid + `key "a\x00b" must hold no white space, control character, '{' or '}'`},
		{"bad utf8", Config{Key: "a\xffb", Spec: bucket}, invalid + `key "a\xffb" is not valid UTF-8`},
		{"no spec", Config{Key: "k"}, invalid + `spec: kind "" cannot be shared by a fleet (want "token-bucket" or "window")`},
		{"ratio spec", Config{Key: "k", Spec: budget.Spec{Kind: budget.KindTokenRatio}}, invalid + `spec: kind "token-ratio" cannot be shared by a fleet (want "token-bucket" or "window")`},
		{"bad spec", Config{Key: "k", Spec: budget.Spec{Kind: budget.KindTokenBucket, Capacity: -1}}, invalid + "spec: budget: invalid spec: capacity must be in (0, 1000000] tokens, got -1"},
		{"short window", Config{Key: "k", Spec: budget.Spec{Kind: budget.KindWindow, Window: time.Millisecond, Ratio: 0.1}}, invalid + "spec: window must be at least 10ms and a whole number of 10µs for a fleet budget, got 1ms"},
		{"lease too big", key(Config{LeaseSize: 501}), invalid + "lease_size must be in [0, capacity 500] tokens, got 501"},
		{"lease negative", key(Config{LeaseSize: -1}), invalid + "lease_size must be in [0, capacity 500] tokens, got -1"},
		{"lease infinite", key(Config{LeaseSize: math.Inf(1)}), invalid + "lease_size must be in [0, capacity 500] tokens, got +Inf"},
		{"lease NaN", key(Config{LeaseSize: math.NaN()}), invalid + "lease_size must be in [0, capacity 500] tokens, got NaN"},
		{"window lease", Config{Key: "k", Spec: window, LeaseSize: 1.5}, invalid + "lease_size must be a whole number of retries in [0, 1e6] for a window, got 1.5"},
		{"window lease too big", Config{Key: "k", Spec: window, LeaseSize: 2e6}, invalid + "lease_size must be a whole number of retries in [0, 1e6] for a window, got 2e+06"},
		{"fleet size negative", key(Config{FleetSize: -1}), invalid + "fleet_size must be in [0, 100000], got -1"},
		{"fleet size too big", key(Config{FleetSize: 100_001}), invalid + "fleet_size must be in [0, 100000], got 100001"},
		{"lease ttl short", key(Config{LeaseTTL: time.Millisecond}), invalid + "lease_ttl must be in [100ms, 1h0m0s] (0: 2s), got 1ms"},
		{"lease ttl negative", key(Config{LeaseTTL: -time.Second}), invalid + "lease_ttl must be in [100ms, 1h0m0s] (0: 2s), got -1s"},
		{"lease ttl long", key(Config{LeaseTTL: 2 * time.Hour}), invalid + "lease_ttl must be in [100ms, 1h0m0s] (0: 2s), got 2h0m0s"},
		{"timeout negative", key(Config{Timeout: -time.Second}), invalid + "timeout must be in [1ms, 1m0s] (0: 50ms), got -1s"},
		{"timeout short", key(Config{Timeout: time.Microsecond}), invalid + "timeout must be in [1ms, 1m0s] (0: 50ms), got 1µs"},
		{"timeout long", key(Config{Timeout: time.Hour}), invalid + "timeout must be in [1ms, 1m0s] (0: 50ms), got 1h0m0s"},
		{"max wait long", key(Config{MaxWait: 2 * time.Minute}), invalid + "max_wait must be at most 1m0s (0: 20ms; negative: never wait), got 2m0s"},
		{"heartbeat short", key(Config{Heartbeat: time.Millisecond}), invalid + "heartbeat must be in [100ms, 1h0m0s] (0: 10s), got 1ms"},
		{"heartbeat negative", key(Config{Heartbeat: -time.Second}), invalid + "heartbeat must be in [100ms, 1h0m0s] (0: 10s), got -1s"},
		// 10 × 300,000 h overflows a Duration: the state_ttl check alone let it through.
		{"heartbeat overflowing 10 ×", key(Config{Heartbeat: 300_000 * time.Hour, StateTTL: time.Hour}), invalid + "heartbeat must be in [100ms, 1h0m0s] (0: 10s), got 300000h0m0s"},
		{"round trips negative", key(Config{RoundTrips: -5}), invalid + "round_trips must be in [1, 1000000] a second (0: 1000), got -5"},
		{"round trips too many", key(Config{RoundTrips: 1_000_001}), invalid + "round_trips must be in [1, 1000000] a second (0: 1000), got 1000001"},
		{"rejoin negative", key(Config{RejoinInterval: -time.Second}), invalid + "rejoin_interval must be in [10ms, 1m0s] (0: 250ms), got -1s"},
		{"rejoin short", key(Config{RejoinInterval: time.Nanosecond}), invalid + "rejoin_interval must be in [10ms, 1m0s] (0: 250ms), got 1ns"},
		{"rejoin long", key(Config{RejoinInterval: time.Hour}), invalid + "rejoin_interval must be in [10ms, 1m0s] (0: 250ms), got 1h0m0s"},
		{"state ttl short", key(Config{StateTTL: time.Minute}), invalid + "state_ttl (1m0s) must be at least 10 × heartbeat (10s)"},
		{"state ttl negative", key(Config{StateTTL: -time.Hour}), invalid + "state_ttl must be in [10 × heartbeat, 8760h0m0s] (0: 24h0m0s), got -1h0m0s"},
		{"state ttl long", key(Config{StateTTL: 9000 * time.Hour}), invalid + "state_ttl must be in [10 × heartbeat, 8760h0m0s] (0: 24h0m0s), got 9000h0m0s"},
		{"id", key(Config{ID: "a b"}), invalid + `id "a b" must hold no white space, control character, '{' or '}'`},
		{"long id", key(Config{ID: strings.Repeat("i", 201)}), invalid + "id is 201 bytes long, at most 200 allowed"},
	} {
		_, err := New(context.Background(), newClient(t, "127.0.0.1:1"), c.cfg)
		got := "<nil>"
		if err != nil {
			got = err.Error()
		}
		if got != c.want || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s:\n got %s\nwant %s (wrapping ErrInvalidConfig)", c.name, got, c.want)
		}
	}

	// The bounds themselves are accepted, and a negative MaxWait (never
	// wait) too.
	for _, cfg := range []Config{
		key(Config{LeaseSize: 500, FleetSize: 100_000, LeaseTTL: 100 * time.Millisecond, Timeout: time.Millisecond,
			MaxWait: time.Minute, Heartbeat: 100 * time.Millisecond, RoundTrips: 1, RejoinInterval: 10 * time.Millisecond,
			StateTTL: time.Second, ID: strings.Repeat("i", 200)}),
		key(Config{LeaseTTL: time.Hour, Timeout: time.Minute, MaxWait: -1, Heartbeat: time.Hour, RoundTrips: 1_000_000,
			RejoinInterval: time.Minute, StateTTL: 8760 * time.Hour}),
		{Key: strings.Repeat("k", 200), Spec: window, LeaseSize: 1e6},
	} {
		if _, _, err := cfg.withDefaults(); err != nil {
			t.Errorf("%+v at the bounds: %v", cfg, err)
		}
	}

	// Every invalid field is reported at once.
	_, err := New(context.Background(), newClient(t, "127.0.0.1:1"), Config{Spec: bucket, LeaseTTL: 1, Heartbeat: 1, Timeout: -1, RejoinInterval: -1})
	for _, want := range []string{"key must", "lease_ttl must", "heartbeat must", "timeout must", "rejoin_interval must"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("all errors at once: %v lacks %q", err, want)
		}
	}
	if _, err := New(context.Background(), nil, Config{Key: "k", Spec: bucket}); err == nil || err.Error() != invalid+"nil Redis client" {
		t.Errorf("nil client: %v", err)
	}
}

func TestWatchConfigErrors(t *testing.T) {
	rdb := newClient(t, "127.0.0.1:1")
	d := new(killswitch.Dials)
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
		dial string
		d    *killswitch.Dials
		cfg  WatchConfig
		want string
	}{
		{"poll negative", rdb, "x", d, WatchConfig{PollInterval: -time.Second}, invalid + "WatchConfig.PollInterval must be in [10ms, 24h0m0s] (0: 500ms), got -1s"},
		{"poll short", rdb, "x", d, WatchConfig{PollInterval: time.Millisecond}, invalid + "WatchConfig.PollInterval must be in [10ms, 24h0m0s] (0: 500ms), got 1ms"},
		{"poll long", rdb, "x", d, WatchConfig{PollInterval: 48 * time.Hour}, invalid + "WatchConfig.PollInterval must be in [10ms, 24h0m0s] (0: 500ms), got 48h0m0s"},
		{"timeout negative", rdb, "x", d, WatchConfig{Timeout: -time.Second}, invalid + "WatchConfig.Timeout must be in [1ms, 1m0s] (0: 100ms), got -1s"},
		{"timeout short", rdb, "x", d, WatchConfig{Timeout: time.Microsecond}, invalid + "WatchConfig.Timeout must be in [1ms, 1m0s] (0: 100ms), got 1µs"},
		{"timeout long", rdb, "x", d, WatchConfig{Timeout: time.Hour}, invalid + "WatchConfig.Timeout must be in [1ms, 1m0s] (0: 100ms), got 1h0m0s"},
		{"no dials", rdb, "x", nil, WatchConfig{}, invalid + "Watch needs a Redis client and dials"},
		{"no client", nil, "x", d, WatchConfig{}, invalid + "Watch needs a Redis client and dials"},
		{"long name", rdb, strings.Repeat("n", 100_000), d, WatchConfig{}, invalid + "dials name is 100000 bytes long, at most 200 allowed"},
		{"empty name", rdb, "", d, WatchConfig{}, invalid + "dials name must not be empty"},
		{"all at once", rdb, "a b", d, WatchConfig{PollInterval: -1, Timeout: -1},
			invalid + `dials name "a b" must hold no white space, control character, '{' or '}'` + "\n" +
				invalid + "WatchConfig.PollInterval must be in [10ms, 24h0m0s] (0: 500ms), got -1ns\n" +
				invalid + "WatchConfig.Timeout must be in [1ms, 1m0s] (0: 100ms), got -1ns"},
	} {
		w, err := Watch(c.rdb, c.dial, c.d, c.cfg)
		if w != nil {
			w.Close()
		}
		got := "<nil>"
		if err != nil {
			got = err.Error()
		}
		if got != c.want || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s:\n got %s\nwant %s (wrapping ErrInvalidConfig)", c.name, got, c.want)
		}
	}
	// The bounds themselves are accepted.
	for _, cfg := range []WatchConfig{{PollInterval: 10 * time.Millisecond, Timeout: time.Millisecond}, {PollInterval: 24 * time.Hour, Timeout: time.Minute}} {
		if _, err := cfg.withDefaults(); err != nil {
			t.Errorf("%+v at the bounds: %v", cfg, err)
		}
	}
}

func TestConnectionFieldErrors(t *testing.T) {
	one := []string{"127.0.0.1:1"}
	for _, c := range []struct {
		name string
		c    Connection
		want string
	}{
		{"timeout negative", Connection{Addrs: one, Timeout: -time.Second}, invalid + "Connection.Timeout must be in [1ms, 1m0s] (0: 50ms), got -1s"},
		{"timeout short", Connection{Addrs: one, Timeout: time.Nanosecond}, invalid + "Connection.Timeout must be in [1ms, 1m0s] (0: 50ms), got 1ns"},
		{"timeout long", Connection{Addrs: one, Timeout: time.Hour}, invalid + "Connection.Timeout must be in [1ms, 1m0s] (0: 50ms), got 1h0m0s"},
		{"pool negative", Connection{Addrs: one, PoolSize: -1}, invalid + "Connection.PoolSize must be in [0, 1000] connections per server (0: 4), got -1"},
		{"pool too big", Connection{Addrs: one, PoolSize: 1_000_000}, invalid + "Connection.PoolSize must be in [0, 1000] connections per server (0: 4), got 1000000"},
		{"no address", Connection{}, invalid + "Addrs: no Redis address"},
		{"long address", Connection{Addrs: []string{strings.Repeat("h", 100_000) + ":1"}}, invalid + `Addrs: Redis address "` + strings.Repeat("h", 80) + `" is not host:port`},
		{"too many addresses", Connection{Deployment: Cluster, Addrs: strings.Split(strings.Repeat("h:1,", 1000)+"h:1", ",")}, invalid + "Addrs: 1001 addresses, at most 1000 allowed"},
		{"both at once", Connection{Addrs: one, Timeout: -1, PoolSize: -1},
			invalid + "Connection.Timeout must be in [1ms, 1m0s] (0: 50ms), got -1ns\n" +
				invalid + "Connection.PoolSize must be in [0, 1000] connections per server (0: 4), got -1"},
	} {
		err := c.c.Validate()
		got := "<nil>"
		if err != nil {
			got = err.Error()
		}
		if got != c.want || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s:\n got %s\nwant %s (wrapping ErrInvalidConfig)", c.name, got, c.want)
		}
		if _, err := c.c.Client(); err == nil {
			t.Errorf("%s: Client() accepted it", c.name)
		}
	}
	for _, c := range []Connection{{Addrs: one, Timeout: time.Millisecond, PoolSize: 1000}, {Addrs: one, Timeout: time.Minute}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v at the bounds: %v", c, err)
		}
	}
}

func TestClientOptionsTimeout(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    string // the panic's message; "" for none
	}{
		{0, ""},
		{time.Millisecond, ""},
		{time.Minute, ""},
		{-time.Second, "fleet.ClientOptions: timeout must be in [1ms, 1m0s] (0: 50ms), got -1s"},
		{time.Microsecond, "fleet.ClientOptions: timeout must be in [1ms, 1m0s] (0: 50ms), got 1µs"},
		{time.Hour, "fleet.ClientOptions: timeout must be in [1ms, 1m0s] (0: 50ms), got 1h0m0s"},
	} {
		got := func() (msg string) {
			defer func() {
				if r := recover(); r != nil {
					msg, _ = r.(string)
					if msg == "" {
						msg = "a panic that is not a string"
					}
				}
			}()
			o := ClientOptions("127.0.0.1:1", "", c.timeout)
			if want := c.timeout; want != 0 && o.ReadTimeout != want {
				return "ReadTimeout " + o.ReadTimeout.String()
			}
			if c.timeout == 0 && o.ReadTimeout != DefaultTimeout {
				return "ReadTimeout " + o.ReadTimeout.String()
			}
			return ""
		}()
		if got != c.want {
			t.Errorf("ClientOptions(…, %v): got %q, want %q", c.timeout, got, c.want)
		}
	}
}
