package grpcx_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// guarded starts a backend behind a grpcx.Server built from cfg.
func guarded(t *testing.T, cfg grpcx.ServerConfig, steps ...step) (*backend, *grpcx.Server) {
	t.Helper()
	sg, err := grpcx.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return newBackend(t, sg.ServerOptions(), steps...), sg
}

// waitFor polls cond until it holds, failing the test after 5 s (scaled
// with the host's slowness).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(hostspeed.Scale(5 * time.Second)); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// result is how a raw call (no client interceptor) ended.
type result struct {
	err     error
	trailer metadata.MD
}

// rawCheck calls Check as attempt n, with no client interceptor, so that
// the test sees exactly what the server answered.
func rawCheck(ctx context.Context, c healthpb.HealthClient, attempt string) result {
	if attempt != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "stormguard-attempt", attempt)
	}
	var tr metadata.MD
	err := check(ctx, c, grpc.Trailer(&tr))
	return result{err, tr}
}

// Under overload the queue sheds retries before first tries, and serves
// first tries first.
func TestServerShedsRetriesFirst(t *testing.T) {
	leakcheck.Check(t)
	release := make(chan struct{})
	b, sg := guarded(t, grpcx.ServerConfig{
		Config: admit.Config{
			Limit:      limit.Spec{Kind: limit.KindFixed, Limit: 1},
			Queue:      shed.Config{Capacity: 2},
			RetryAfter: 250 * time.Millisecond,
		},
	}, step{fn: func(ctx context.Context) error { <-release; return nil }}, step{})
	c := dial(t, b.addr)

	var wg sync.WaitGroup
	results := make(map[string]result)
	var mu sync.Mutex
	send := func(name, attempt string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := rawCheck(context.Background(), c, attempt)
			mu.Lock()
			results[name] = res
			mu.Unlock()
		}()
	}
	send("busy", "1") // holds the only slot until released
	waitFor(t, "the first call to start", func() bool { return len(b.seen()) == 1 })
	send("retry-1", "2")
	waitFor(t, "retry-1 to queue", func() bool { return sg.Stats().Queued == 1 })
	send("retry-2", "3")
	waitFor(t, "retry-2 to queue", func() bool { return sg.Stats().Queued == 2 })
	send("first", "1") // the queue is full: the newest retry makes room
	waitFor(t, "retry-2 to be evicted", func() bool { return sg.Stats().Shed[grpcx.ShedEvicted] == 1 })
	close(release)
	wg.Wait()

	if got, want := b.attempts(), []string{"1/", "1/", "2/"}; !slices.Equal(got, want) {
		t.Errorf("served in order %q, want %q (first tries first)", got, want)
	}
	ev := results["retry-2"]
	if status.Code(ev.err) != codes.Unavailable {
		t.Errorf("evicted retry: %v, want Unavailable", ev.err)
	}
	if got := ev.trailer.Get("stormguard-overload"); !slices.Equal(got, []string{"instance"}) {
		t.Errorf("evicted retry: stormguard-overload = %q, want [instance]", got)
	}
	if got := ev.trailer.Get(wire.KeyGRPCRetryPushback); !slices.Equal(got, []string{"250"}) {
		t.Errorf("evicted retry: %s = %q, want [250]", wire.KeyGRPCRetryPushback, got)
	}
	for _, name := range []string{"busy", "retry-1", "first"} {
		if err := results[name].err; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	st := sg.Stats()
	if st.Arrived != 4 || st.Retries != 2 || st.Goodput != 3 || st.ShedTotal() != 1 || st.Queue.Retries.Evicted != 1 {
		t.Errorf("stats = %+v; want 4 arrived, 2 retries, 3 goodput, 1 retry evicted", st)
	}
}

// A call whose deadline leaves MinRemaining or less is dropped before its
// handler runs, with DEADLINE_EXCEEDED, and counted.
func TestServerDropsExpired(t *testing.T) {
	leakcheck.Check(t)
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{MinRemaining: 100 * time.Millisecond}})
	c := dial(t, b.addr)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if res := rawCheck(ctx, c, ""); status.Code(res.err) != codes.DeadlineExceeded {
		t.Errorf("short deadline: %v, want DeadlineExceeded", res.err)
	}
	// A caller that is not grpc-go says it with stormguard-timeout.
	ctx2 := metadata.AppendToOutgoingContext(context.Background(), "stormguard-timeout", "0n")
	if res := rawCheck(ctx2, c, ""); status.Code(res.err) != codes.DeadlineExceeded {
		t.Errorf("stormguard-timeout 0n: %v, want DeadlineExceeded", res.err)
	}
	if n := len(b.seen()); n != 0 {
		t.Errorf("the handler ran %d times, want never", n)
	}
	if st := sg.Stats(); st.Expired != 2 || st.Arrived != 2 {
		t.Errorf("stats = %+v, want 2 arrived, 2 expired", st)
	}
}

// The handler's deadline is bounded by MaxTimeout, and its context carries
// the attempt number, here from grpc-previous-rpc-attempts.
func TestServerBoundsDeadlineAndCarriesAttempt(t *testing.T) {
	leakcheck.Check(t)
	b, _ := guarded(t, grpcx.ServerConfig{Config: admit.Config{MaxTimeout: 200 * time.Millisecond}})
	c := dial(t, b.addr)

	ctx := metadata.AppendToOutgoingContext(context.Background(), "grpc-previous-rpc-attempts", "2")
	if res := rawCheck(ctx, c, ""); res.err != nil {
		t.Fatal(res.err)
	}
	got := b.seen()[0]
	if !got.hasDL || got.left > 200*time.Millisecond || got.left <= 0 {
		t.Errorf("handler saw %v left (deadline %v), want in (0, 200ms]", got.left, got.hasDL)
	}
	if got.ctxTry != 3 {
		t.Errorf("deadline.Attempt(handler ctx) = %d, want 3", got.ctxTry)
	}
}

// The kill switch sheds with the service signal: a stormguard client makes
// exactly one attempt.
func TestServerKillSwitch(t *testing.T) {
	leakcheck.Check(t)
	dials := new(killswitch.Dials)
	if err := dials.SetShedFraction(1); err != nil {
		t.Fatal(err)
	}
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Dials: dials}})
	c := dial(t, b.addr, grpc.WithChainUnaryInterceptor(grpcx.UnaryClientInterceptor(fast(t, nil))))

	var tr metadata.MD
	err := check(context.Background(), c, grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrServerSaidStop) {
		t.Errorf("err = %v, want Unavailable, server said stop", err)
	}
	if got := tr.Get("stormguard-overload"); !slices.Equal(got, []string{"service"}) {
		t.Errorf("stormguard-overload = %q, want [service]", got)
	}
	if got := tr.Get(wire.KeyGRPCRetryPushback); !slices.Equal(got, []string{"-1"}) {
		t.Errorf("%s = %q, want [-1] (no gRFC A6 client retries)", wire.KeyGRPCRetryPushback, got)
	}
	if st := sg.Stats(); st.Arrived != 1 || st.Shed[grpcx.ShedKillSwitch] != 1 || len(b.seen()) != 0 {
		t.Errorf("stats = %+v, handler calls %d; want one call shed by the kill switch, none served", st, len(b.seen()))
	}
}

func TestServerThrottlesClient(t *testing.T) {
	leakcheck.Check(t)
	var gotMethod string
	b, sg := guarded(t, grpcx.ServerConfig{
		Config: admit.Config{
			RetryAfter: 1500 * time.Microsecond,
		},
		// sent rounded up: 2 ms
		ThrottleClient: func(ctx context.Context, method string) bool {
			gotMethod = method
			return true
		},
	})
	c := dial(t, b.addr)
	res := rawCheck(context.Background(), c, "")
	if status.Code(res.err) != codes.ResourceExhausted {
		t.Errorf("err = %v, want ResourceExhausted", res.err)
	}
	if got := res.trailer.Get(wire.KeyGRPCRetryPushback); !slices.Equal(got, []string{"2"}) {
		t.Errorf("%s = %q, want [2]", wire.KeyGRPCRetryPushback, got)
	}
	if len(res.trailer.Get("stormguard-overload")) != 0 {
		t.Errorf("a throttled client is not an overload: trailer %v", res.trailer)
	}
	if gotMethod != "/grpc.health.v1.Health/Check" {
		t.Errorf("ThrottleClient got method %q", gotMethod)
	}
	if st := sg.Stats(); st.Shed[grpcx.ShedThrottled] != 1 {
		t.Errorf("stats = %+v, want one throttled", st)
	}
}

// A client that leaves while its call is queued is counted as cancelled,
// and its slot is not lost.
func TestServerCallerLeavesQueue(t *testing.T) {
	leakcheck.Check(t)
	release := make(chan struct{})
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: limit.Spec{Kind: limit.KindFixed, Limit: 1}}},
		step{fn: func(ctx context.Context) error { <-release; return nil }}, step{})
	c := dial(t, b.addr)

	done := make(chan result, 1)
	go func() { done <- rawCheck(context.Background(), c, "") }()
	waitFor(t, "the first call to start", func() bool { return len(b.seen()) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan result, 1)
	go func() { left <- rawCheck(ctx, c, "") }()
	waitFor(t, "the second call to queue", func() bool { return sg.Stats().Queued == 1 })
	cancel()
	if res := <-left; status.Code(res.err) != codes.Canceled {
		t.Errorf("queued call: %v, want Canceled", res.err)
	}
	waitFor(t, "the server to count it", func() bool { return sg.Stats().Canceled == 1 })
	close(release)
	if res := <-done; res.err != nil {
		t.Fatal(res.err)
	}
	if res := rawCheck(context.Background(), c, ""); res.err != nil {
		t.Errorf("a call after: %v (the slot was lost?)", res.err)
	}
	if st := sg.Stats(); st.Goodput != 2 || st.Canceled != 1 || st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// Streams go through the same limit and queue as unary calls.
func TestServerStreamAdmission(t *testing.T) {
	leakcheck.Check(t)
	release := make(chan struct{})
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: limit.Spec{Kind: limit.KindFixed, Limit: 1}}},
		step{msgs: 1, fn: func(ctx context.Context) error { <-release; return nil }}, step{msgs: 1})
	c := dial(t, b.addr)

	type out struct {
		n   int
		err error
	}
	first, second := make(chan out, 1), make(chan out, 1)
	go func() { n, err := watch(context.Background(), c); first <- out{n, err} }()
	waitFor(t, "the stream to start", func() bool { return sg.Stats().InFlight == 1 })
	go func() { n, err := watch(context.Background(), c); second <- out{n, err} }()
	waitFor(t, "the unary call to queue", func() bool { return sg.Stats().Queued == 1 })
	unary := make(chan result, 1)
	go func() { unary <- rawCheck(context.Background(), c, "") }()
	waitFor(t, "both to queue", func() bool { return sg.Stats().Queued == 2 })
	close(release)
	for _, ch := range []chan out{first, second} {
		if o := <-ch; o.err != nil || o.n != 1 {
			t.Errorf("stream: %d messages, %v; want 1, nil", o.n, o.err)
		}
	}
	if res := <-unary; res.err != nil {
		t.Errorf("unary: %v", res.err)
	}
	if st := sg.Stats(); st.Goodput != 3 || st.Queue.FirstTries.Served != 2 {
		t.Errorf("stats = %+v, want 3 goodput, 2 served from the queue", st)
	}
}

// A handler that fails because its own downstream call gave up after
// retrying tells its caller not to retry: retries happen at one layer.
func TestServerRelaysRetriesExhausted(t *testing.T) {
	leakcheck.Check(t)
	back := newBackend(t, nil, step{code: codes.Unavailable})
	down := dial(t, back.addr, grpc.WithChainUnaryInterceptor(grpcx.UnaryClientInterceptor(fast(t, nil))))
	mid, sg := guarded(t, grpcx.ServerConfig{}, step{fn: func(ctx context.Context) error {
		_, err := down.Check(ctx, &healthpb.HealthCheckRequest{})
		return err // a GiveUpError after 3 attempts
	}})
	front := dial(t, mid.addr, grpc.WithChainUnaryInterceptor(grpcx.UnaryClientInterceptor(fast(t, nil))))

	var tr metadata.MD
	err := check(context.Background(), front, grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrServerSaidStop) {
		t.Errorf("front: %v, want Unavailable, server said stop", err)
	}
	if got := tr.Get("stormguard-retries-exhausted"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("stormguard-retries-exhausted = %q, want [1]", got)
	}
	if got, want := len(mid.seen()), 1; got != want {
		t.Errorf("middle tier saw %d attempts, want %d", got, want)
	}
	if got, want := len(back.seen()), 3; got != want {
		t.Errorf("back end saw %d attempts, want %d (3 from the middle tier, none multiplied)", got, want)
	}
	if st := sg.Stats(); st.Failed != 1 {
		t.Errorf("middle stats = %+v, want 1 failed", st)
	}
}

func TestServerConfigValidate(t *testing.T) {
	for _, cfg := range []grpcx.ServerConfig{
		{Config: admit.Config{MaxTimeout: -time.Second}},
		{Config: admit.Config{RetryAfter: -time.Second}},
		{Config: admit.Config{MinRemaining: time.Minute, MaxTimeout: time.Second}},
		{Config: admit.Config{MinRemaining: time.Second, Queue: shed.Config{MinRemaining: 2 * time.Second}}},
		{Config: admit.Config{Queue: shed.Config{Capacity: -1}}},
		{Config: admit.Config{Limit: limit.Spec{Kind: limit.KindFixed}}},
	} {
		if _, err := grpcx.NewServer(cfg); !errors.Is(err, grpcx.ErrInvalidServerConfig) {
			t.Errorf("NewServer(%+v) = %v, want ErrInvalidServerConfig", cfg, err)
		}
	}
}

// Both servers' configurations are admit.Config, embedded, and beside it
// the hooks whose types are the transport's: one YAML block or JSON object
// decodes into either exactly as into the gate's configuration, so nothing
// is lost on the way to the gate.
func TestServerConfigsEmbedAdmit(t *testing.T) {
	const block = "max_timeout: 2s\nmin_remaining: 5ms\nretry_after: 3s\nlimit: {kind: fixed, limit: 40}\n" +
		"queue: {capacity: 10, order: lifo}\nmax_criticality: sheddable-plus\nsupersede: {ttl: 5s}\n"
	var want admit.Config
	if err := yaml.Unmarshal([]byte(block), &want); err != nil || want.MaxTimeout != 2*time.Second || want.Supersede == nil {
		t.Fatalf("admit.Config from YAML: %+v, %v", want, err)
	}
	js, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var gy, gj grpcx.ServerConfig
	var hy, hj httpx.ServerConfig
	for _, d := range []struct {
		name string
		err  error
		got  admit.Config
	}{
		{"grpcx.ServerConfig from YAML", yaml.Unmarshal([]byte(block), &gy), gy.Config},
		{"grpcx.ServerConfig from JSON", json.Unmarshal(js, &gj), gj.Config},
		{"httpx.ServerConfig from YAML", yaml.Unmarshal([]byte(block), &hy), hy.Config},
		{"httpx.ServerConfig from JSON", json.Unmarshal(js, &hj), hj.Config},
	} {
		if d.err != nil || !reflect.DeepEqual(d.got, want) {
			t.Errorf("%s: %+v, %v; want %+v", d.name, d.got, d.err, want)
		}
	}
	for _, shell := range []reflect.Type{reflect.TypeFor[grpcx.ServerConfig](), reflect.TypeFor[httpx.ServerConfig]()} {
		var names []string
		for f := range shell.Fields() {
			names = append(names, f.Name)
			if !f.Anonymous && (f.Tag.Get("json") != "-" || f.Tag.Get("yaml") != "-") {
				t.Errorf("%v.%s is configuration (tags `%s`); want only admit.Config's fields to be", shell, f.Name, f.Tag)
			}
		}
		if !slices.Equal(names, []string{"Config", "ThrottleClient", "TrustCriticality", "IdempotencyScope"}) {
			t.Errorf("%v's fields: %v; want admit.Config embedded, ThrottleClient, TrustCriticality and IdempotencyScope", shell, names)
		}
	}
}
