package rehearse

import (
	"context"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim/scenario"
)

// The path to an endpoint: the clients call its entry, which is the
// error front when the scenario injects errors into it, else the fault
// proxy when it holds, cuts or slows its network, else the endpoint itself.
//
//	clients ──▶ error front ──▶ fault proxy ──▶ the endpoint
//	            (HTTP-aware:    (lab.Proxy: TCP
//	             500, gRPC       hold and release,
//	             UNAVAILABLE)    drop, latency)
//
// A tcp dependency has the proxy alone, on the address the user's service
// is configured to call.

// path is what stands in front of one endpoint during a run.
type path struct {
	entry string // where the clients connect
	proxy *lab.Proxy
	front *front
	srv   *http.Server
	lns   []net.Listener
}

// ProxyStats is what the fault proxy and the error front in front of one
// endpoint did.
type ProxyStats struct {
	Endpoint string          `json:"endpoint"`
	Proxy    *lab.ProxyStats `json:"proxy,omitempty"`
	// Injected counts the responses the error front failed; Forwarded
	// those it passed on.
	Injected  int64 `json:"injected,omitempty"`
	Forwarded int64 `json:"forwarded,omitempty"`
}

// openPath listens for what stands in front of e (nothing when the
// scenario has no fault for it) and returns the path; it runs from start.
func openPath(e EndpointPlan, g *Guard, seed uint64) (*path, error) {
	p := &path{entry: e.Addr}
	if len(e.Faults) > 0 || e.Kind == scenario.EndpointTCP {
		addr := "127.0.0.1:0"
		if e.Kind == scenario.EndpointTCP {
			addr = e.Listen
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		p.lns = append(p.lns, ln)
		p.proxy = lab.NewProxy(ln, e.Addr)
		// Its connections onward are the Guard's too: one to anything but
		// loopback or an allowed address is refused before it is made,
		// whatever the target's name resolves to when it is dialled.
		p.proxy.SetDialer(g.Dialer())
		p.entry = ln.Addr().String()
	}
	if len(e.Errors) > 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.close()
			return nil, err
		}
		p.lns = append(p.lns, ln)
		p.front = newFront(p.entry, e.Kind == scenario.EndpointGRPC, e.Errors, g, seed)
		var protos http.Protocols
		protos.SetHTTP1(true)
		protos.SetUnencryptedHTTP2(true)
		p.srv = &http.Server{Handler: p.front, Protocols: &protos, ReadHeaderTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
		p.entry = ln.Addr().String()
	}
	return p, nil
}

// run serves the path from start until ctx ends, applying the windows.
func (p *path) run(ctx context.Context, start time.Time, e EndpointPlan) {
	var wg sync.WaitGroup
	if p.proxy != nil {
		wg.Go(func() { p.proxy.RunFaults(ctx, start, e.Faults) })
		wg.Go(func() { p.proxy.Serve(ctx) })
	}
	if p.front != nil {
		p.front.start = start
		ln := p.lns[len(p.lns)-1]
		wg.Go(func() { p.srv.Serve(ln) })
		wg.Go(func() {
			<-ctx.Done()
			p.srv.Close()
		})
	}
	wg.Wait()
}

// close releases the listeners (run's end does it too).
func (p *path) close() {
	if p.srv != nil {
		p.srv.Close()
	}
	if p.proxy != nil {
		p.proxy.Close()
	}
	for _, ln := range p.lns {
		ln.Close()
	}
}

// stats returns what the path did.
func (p *path) stats(name string) ProxyStats {
	s := ProxyStats{Endpoint: name}
	if p.proxy != nil {
		st := p.proxy.Stats()
		s.Proxy = &st
	}
	if p.front != nil {
		s.Injected, s.Forwarded = p.front.injected.Load(), p.front.forwarded.Load()
	}
	return s
}

// front is the HTTP-aware fault front: during an errors window it answers
// a share of the requests itself with a failure — 500 for HTTP, a
// trailers-only UNAVAILABLE for gRPC (HTTP/2 without TLS, as gRPC's
// plain-text transport speaks it) — and forwards the others.
type front struct {
	grpc      bool
	windows   []lab.Window
	start     time.Time
	rp        *httputil.ReverseProxy
	mu        sync.Mutex
	rng       *rand.Rand
	injected  atomic.Int64
	forwarded atomic.Int64
}

func newFront(upstream string, grpc bool, windows []lab.Window, g *Guard, seed uint64) *front {
	f := &front{grpc: grpc, windows: windows, rng: rand.New(rand.NewPCG(seed, lab.StreamID("rehearse", "front", upstream)))}
	tr := g.transport()
	if grpc {
		var protos http.Protocols
		protos.SetUnencryptedHTTP2(true)
		tr.Protocols = &protos
	}
	target := &url.URL{Scheme: "http", Host: upstream}
	f.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The upstream's connection failed: a gateway's answer.
			f.fail(w, http.StatusBadGateway, "14", "stormguard rehearse: upstream: "+err.Error())
		},
	}
	return f
}

// share is the fraction of responses to fail at offset t of the run.
func (f *front) share(t time.Duration) float64 {
	s := 0.0
	for _, w := range f.windows {
		if t >= w.At && t < w.At+w.Duration {
			s = max(s, w.Factor)
		}
	}
	return s
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := f.share(time.Since(f.start)); s > 0 {
		f.mu.Lock()
		u := f.rng.Float64()
		f.mu.Unlock()
		if u < s {
			f.injected.Add(1)
			io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
			f.fail(w, http.StatusInternalServerError, "14", "stormguard rehearse: injected error")
			return
		}
	}
	f.forwarded.Add(1)
	f.rp.ServeHTTP(w, r)
}

// fail answers a failure: status for HTTP; for gRPC, a trailers-only
// response with grpc-status code (14: UNAVAILABLE).
func (f *front) fail(w http.ResponseWriter, status int, code, msg string) {
	if f.grpc {
		h := w.Header()
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", code)
		h.Set("Grpc-Message", strings.ReplaceAll(url.PathEscape(msg), "%20", " "))
		w.WriteHeader(http.StatusOK)
		return
	}
	http.Error(w, msg, status)
}
