// Package demo is a small service to rehearse a retry storm against: a
// "shop" whose handler holds one of a fixed number of workers for a fixed
// service time, like a database that serves everything it admitted
// whether its caller still waits or not (its kill switch's shed fraction
// also refuses a queued request when it reaches a worker), behind stormguard's httpx.Server
// (its kill switch, its metrics, and, when Defended, its defenses), with
// a kill-switch admin endpoint and a Prometheus /metrics page. The
// example in examples/rehearse and the rehearse package's tests run
// rehearsals against it; it listens on 127.0.0.1 only.
package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/wire"
)

// Config describes a shop. A zero field takes the default in brackets.
type Config struct {
	// Addr is where the shop serves its one endpoint, /buy
	// [127.0.0.1:0]; AdminAddr its kill-switch admin endpoint, MetricsAddr
	// its /metrics page [both 127.0.0.1:0].
	Addr, AdminAddr, MetricsAddr string
	// Workers serve at once, each for ServiceTime [10 workers, 20 ms: 500
	// requests a second].
	Workers     int
	ServiceTime time.Duration
	// Defended turns on stormguard's server defenses: a concurrency limit
	// of Workers with the queue's default order (first tries first,
	// adaptive LIFO), deadlines from the wire, work whose caller left
	// dropped before it starts. Without it the shop queues every request
	// and works on it to the end.
	Defended bool
	// Token is the admin endpoint's bearer token (at least 16 bytes).
	Token string
	// Redis and FleetDials, when both are set, make the shop follow the
	// fleet's dials of that name (fleet.Watch) as well.
	Redis, FleetDials string
}

// Shop is a running shop.
type Shop struct {
	// URL of /buy; AdminURL of the admin endpoint; MetricsURL of /metrics.
	URL, AdminURL, MetricsURL string
	// Dials are the shop's kill switch.
	Dials   *killswitch.Dials
	srvs    []*http.Server
	wg      sync.WaitGroup
	watcher *fleet.Watcher
	rdb     *redis.Client
}

// Start starts a shop; it serves until ctx ends or Close is called.
func Start(ctx context.Context, cfg Config) (*Shop, error) {
	if cfg.Workers == 0 {
		cfg.Workers = 10
	}
	if cfg.ServiceTime == 0 {
		cfg.ServiceTime = 20 * time.Millisecond
	}
	if len(cfg.Token) < killswitch.MinTokenLength {
		return nil, fmt.Errorf("demo: the admin token needs %d bytes", killswitch.MinTokenLength)
	}
	s := &Shop{Dials: &killswitch.Dials{}}
	sc := httpx.ServerConfig{Config: admit.Config{Dials: s.Dials, Limit: limit.Spec{Kind: limit.KindFixed, Limit: 1 << 20}}}
	if cfg.Defended {
		sc.Limit.Limit = cfg.Workers
	}
	sg, err := httpx.NewServer(sc)
	if err != nil {
		return nil, err
	}
	slots := make(chan struct{}, cfg.Workers)
	buy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cfg.Defended {
			slots <- struct{}{} // a worker, whether the caller still waits or not
			defer func() { <-slots }()
			// The kill switch sheds at the worker too: a queued request
			// that reaches one while it sheds is refused at no cost, so
			// shedding drains the queue.
			if f := s.Dials.ShedFraction(); f > 0 && rand.Float64() < f {
				w.Header().Set(wire.HeaderOverload, "service")
				http.Error(w, "shed by the kill switch", http.StatusServiceUnavailable)
				return
			}
		}
		time.Sleep(cfg.ServiceTime)
		w.Write([]byte("ok\n"))
	})
	mux := http.NewServeMux()
	mux.Handle("/buy", sg.Wrap(buy))
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterServer(reg, metrics.Labels{Target: "shop"}, sg.Stats); err != nil {
		return nil, err
	}
	admin, err := killswitch.NewAdmin(s.Dials, cfg.Token)
	if err != nil {
		return nil, err
	}
	mm := http.NewServeMux()
	mm.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	for _, x := range []struct {
		addr string
		h    http.Handler
		url  *string
		path string
	}{{cfg.Addr, mux, &s.URL, "/buy"}, {cfg.AdminAddr, admin, &s.AdminURL, "/"}, {cfg.MetricsAddr, mm, &s.MetricsURL, "/metrics"}} {
		addr := x.addr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		ln, err := killswitch.ListenAdmin(addr) // loopback only, for every listener of the shop
		if err != nil {
			s.Close()
			return nil, err
		}
		srv := &http.Server{Handler: x.h, ReadHeaderTimeout: 10 * time.Second}
		s.srvs = append(s.srvs, srv)
		*x.url = "http://" + ln.Addr().String() + x.path
		s.wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ln.Close()
			}
		})
	}
	if cfg.Redis != "" && cfg.FleetDials != "" {
		s.rdb = redis.NewClient(&redis.Options{Addr: cfg.Redis})
		if s.watcher, err = fleet.Watch(s.rdb, cfg.FleetDials, s.Dials, fleet.WatchConfig{}); err != nil {
			s.Close()
			return nil, err
		}
	}
	context.AfterFunc(ctx, func() { s.Close() })
	return s, nil
}

// Close stops the shop and waits for its servers to end.
func (s *Shop) Close() {
	if s.watcher != nil {
		s.watcher.Close()
	}
	if s.rdb != nil {
		s.rdb.Close()
	}
	for _, srv := range s.srvs {
		srv.Close()
	}
	s.wg.Wait()
}
