package policyfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/retry"
)

// Live is a policy file kept in step with the file on disk while the
// service runs, after grpc-go's service config and Envoy's runtime: a new
// version is read and validated whole, then swapped in with one atomic
// store; an invalid one is refused — its FILE:LINE errors logged, counted
// ([Live.State]) — and the last good version keeps running.
//
// A version holds the retrier of each dependency and the server built from
// its blocks. Every call is decided by one whole version: a request takes
// the version current when it starts ([Live.Transport], [Live.Handler],
// [Live.Current]) and keeps it to its end, so calls in flight during a
// reload finish as they began, and none is dropped. A retrier, breaker,
// budget or server whose block did not change is carried over as it is,
// with its state (the budget's tokens, the breaker's state, the learned
// attempt time, the gate's limit and queue). When a block changes:
//
//   - a dependency gets a new retrier; its budget object is kept if the
//     budget's spec did not change, and a new token bucket starts at the
//     old one's share of its capacity (a reload is not a free burst of
//     retries); its breaker is kept if the breaker's spec did not change;
//   - the server block gets a new server (gate, limiter, queue): requests
//     admitted or queued by the old one finish there, new ones arrive at the
//     new one, whose limit starts afresh, so for as long as the old
//     requests run both limits apply. [Live.ServerStats] adds up the
//     servers' counters, so that the metrics go on without a break.
//
// Changes are noticed by [Live.Watch] (fsnotify on the file's directory)
// or made by calling [Live.Reload] (on SIGHUP, say). Build one with
// [NewLive]; a Live is safe for concurrent use.
type Live struct {
	path string
	o    liveOptions
	cur  atomic.Pointer[Version]

	mu      sync.Mutex // serialises loads; guards servers
	servers []*httpx.Server

	applied, refused atomic.Uint64

	watchOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
	closed    atomic.Bool
}

// Version is one version of a live policy file, with what was built from
// it. It never changes.
type Version struct {
	// Hash names the version: the first 12 hex digits of the SHA-256 of
	// the file's bytes.
	Hash string
	// File is the parsed file.
	File *File
	// LoadedAt is when it was applied.
	LoadedAt time.Time

	retriers map[string]*retry.Retrier
	server   *httpx.Server
}

// Retrier returns the retrier of the dependency dep in this version.
func (v *Version) Retrier(dep string) (*retry.Retrier, error) {
	if r, ok := v.retriers[dep]; ok {
		return r, nil
	}
	_, err := v.File.Client(dep)
	return nil, err
}

// Server returns the HTTP server built from this version's server block
// (every default without one).
func (v *Version) Server() *httpx.Server { return v.server }

// LiveOption configures [NewLive].
type LiveOption func(*liveOptions)

type liveOptions struct {
	retry    []retry.Option
	server   func(*httpx.ServerConfig)
	log      *slog.Logger
	debounce time.Duration
}

// LiveRetryOptions are given to every retrier a version builds, after the
// file's own (see [Client.NewRetrier]): the hooks that export metrics, the
// kill switch's dials. Options that hold state (hooks, dials) are shared by
// all versions, so their counts go on across reloads.
func LiveRetryOptions(opts ...retry.Option) LiveOption {
	return func(o *liveOptions) { o.retry = append(o.retry, opts...) }
}

// LiveServerConfig is called on the configuration of every server a
// version builds, after the file's fields are copied in: set the runtime
// parts there (Dials, OnQueueWait, OnRefuse).
func LiveServerConfig(f func(*httpx.ServerConfig)) LiveOption {
	return func(o *liveOptions) { o.server = f }
}

// LiveLogger sets the logger of the reloads: Info for a version applied,
// Error for one refused, with its FILE:LINE errors [slog.Default()].
func LiveLogger(l *slog.Logger) LiveOption {
	return func(o *liveOptions) {
		if l != nil {
			o.log = l
		}
	}
}

// LiveDebounce sets how long [Live.Watch] waits after the last change it
// sees before it reads the file [100ms], so that a file written in
// several steps is read once, whole.
func LiveDebounce(d time.Duration) LiveOption {
	return func(o *liveOptions) {
		if d > 0 {
			o.debounce = d
		}
	}
}

// NewLive reads the policy file at path and builds its first version. An
// invalid file is an error here: a service should not start without a
// policy. Call [Live.Watch] to follow the file, or [Live.Reload] when told
// to (on SIGHUP, say); [Live.Close] stops the watching.
func NewLive(path string, opts ...LiveOption) (*Live, error) {
	o := liveOptions{log: slog.Default(), debounce: 100 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	l := &Live{path: path, o: o, stop: make(chan struct{}), done: make(chan struct{})}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if _, err := l.load(data, true); err != nil {
		return nil, err
	}
	return l, nil
}

// readFile reads at most MaxFileSize bytes of path.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w", path, ErrFileTooLarge)
	}
	return data, nil
}

// Current returns the version running now.
func (l *Live) Current() *Version { return l.cur.Load() }

// State returns the version running now and the count of reloads by
// result, for metrics.RegisterPolicy and otelx.RegisterPolicy.
func (l *Live) State() schema.PolicyState {
	return schema.PolicyState{Version: l.Current().Hash, Applied: l.applied.Load(), Refused: l.refused.Load()}
}

// Reload reads the file again and applies it if it changed and is valid.
// It returns nil when the new version was applied or the file did not
// change, and the reason otherwise (the FILE:LINE errors of an invalid
// file, or why it could not be read), the running version left as it was.
func (l *Live) Reload() error {
	data, err := readFile(l.path)
	if err != nil {
		l.refuse(l.hashOf(nil), err)
		return err
	}
	_, err = l.load(data, false)
	return err
}

func (l *Live) hashOf(data []byte) string {
	if data == nil {
		return "unreadable"
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:6])
}

// refuse counts and logs a version that was not applied.
func (l *Live) refuse(hash string, err error) {
	l.refused.Add(1)
	running := ""
	if v := l.Current(); v != nil {
		running = v.Hash
	}
	l.o.log.Error("policyfile: refused a new version of the policy file; the last good version keeps running",
		"file", l.path, "version", hash, "running", running, "err", err)
}

// load parses data and, if it is a valid new version, builds and applies
// it. It reports whether a new version was applied.
func (l *Live) load(data []byte, first bool) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hash := l.hashOf(data)
	prev := l.Current()
	if prev != nil && prev.Hash == hash {
		return false, nil
	}
	f, err := Parse(l.path, data)
	if err == nil {
		var v *Version
		if v, err = l.build(f, hash, prev); err == nil {
			l.cur.Store(v)
			if !first {
				l.applied.Add(1)
				l.o.log.Info("policyfile: applied a new version of the policy file",
					"file", l.path, "version", hash, "previous", prev.Hash, "changed", changed(prev, v))
			}
			return true, nil
		}
	}
	if first {
		return false, err
	}
	l.refuse(hash, err)
	return false, err
}

// changed lists what a version changed: the dependencies whose retrier is
// new, and "server" if the server is.
func changed(prev, v *Version) []string {
	var out []string
	for dep, r := range v.retriers {
		if prev.retriers[dep] != r {
			out = append(out, dep)
		}
	}
	slices.Sort(out)
	if prev.server != v.server {
		out = append(out, "server")
	}
	return out
}

// build builds the version of f, carrying over from prev what did not
// change. l.mu is held.
func (l *Live) build(f *File, hash string, prev *Version) (*Version, error) {
	v := &Version{Hash: hash, File: f, LoadedAt: time.Now(), retriers: map[string]*retry.Retrier{}}
	for i := range f.Clients {
		c := &f.Clients[i]
		var old *Client
		var oldR *retry.Retrier
		if prev != nil {
			if oc, err := prev.File.Client(c.Dependency); err == nil {
				old, oldR = oc, prev.retriers[c.Dependency]
			}
		}
		if old != nil && reflect.DeepEqual(old.Policy, c.Policy) && reflect.DeepEqual(old.Breaker, c.Breaker) {
			v.retriers[c.Dependency] = oldR // unchanged: the same retrier, with its state
			continue
		}
		var carry []retry.Option
		sameBudget := old != nil && reflect.DeepEqual(old.Policy.Budget, c.Policy.Budget)
		if sameBudget {
			carry = append(carry, retry.WithBudget(oldR.Budget()))
		}
		if old != nil && old.Breaker != nil && c.Breaker != nil && reflect.DeepEqual(*old.Breaker, *c.Breaker) {
			carry = append(carry, retry.WithBreaker(oldR.Breaker()))
		}
		r, err := c.NewRetrier(append(carry, l.o.retry...)...)
		if err != nil {
			return nil, err
		}
		if old != nil && !sameBudget {
			// A new bucket starts at the old one's share, not full.
			nb, okN := r.Budget().(*budget.TokenBucket)
			ob, okO := oldR.Budget().(*budget.TokenBucket)
			if okN && okO && ob.Capacity() > 0 {
				nb.SetLevel(ob.Level() / ob.Capacity() * nb.Capacity())
			}
		}
		v.retriers[c.Dependency] = r
	}
	if prev != nil && reflect.DeepEqual(prev.File.Server, f.Server) {
		v.server = prev.server
		return v, nil
	}
	cfg := f.HTTPServer()
	if l.o.server != nil {
		l.o.server(&cfg)
	}
	s, err := httpx.NewServer(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: server: %w", f.Name, err)
	}
	v.server = s
	l.servers = append(l.servers, s)
	return v, nil
}

// Transport returns an http.RoundTripper that sends each request through
// the retrier of dep in the version current when the request starts (an
// httpx.Transport over base; nil base: http.DefaultTransport). A version
// without dep fails the request with the error of [File.Client].
func (l *Live) Transport(dep string, base http.RoundTripper) http.RoundTripper {
	return &liveTransport{l: l, dep: dep, base: base}
}

type liveTransport struct {
	l     *Live
	dep   string
	base  http.RoundTripper
	cache atomic.Pointer[transportFor]
}

type transportFor struct {
	r  *retry.Retrier
	rt http.RoundTripper
}

func (t *liveTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r, err := t.l.Current().Retrier(t.dep)
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, err
	}
	c := t.cache.Load()
	if c == nil || c.r != r {
		c = &transportFor{r: r, rt: httpx.NewTransport(t.base, r)}
		t.cache.Store(c)
	}
	return c.rt.RoundTrip(req)
}

// Handler wraps next with the server of the version current when each
// request arrives (see [Version.Server]): the request is admitted, queued
// or refused by that server's gate and runs to its end there.
func (l *Live) Handler(next http.Handler) http.Handler {
	return &liveHandler{l: l, next: next}
}

type liveHandler struct {
	l     *Live
	next  http.Handler
	cache atomic.Pointer[handlerFor]
}

type handlerFor struct {
	s *httpx.Server
	h http.Handler
}

func (h *liveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.l.Current().server
	c := h.cache.Load()
	if c == nil || c.s != s {
		c = &handlerFor{s: s, h: s.Wrap(h.next)}
		h.cache.Store(c)
	}
	c.h.ServeHTTP(w, r)
}

// ServerStats adds up the counters of every server the versions built, so
// that a reload that builds a new server does not reset them (register it
// with metrics.RegisterServer or otelx.RegisterServer); gauges are summed
// too (requests still running in an old server are in flight), but for
// Limit, the current server's.
func (l *Live) ServerStats() admit.Stats {
	l.mu.Lock()
	servers := slices.Clone(l.servers)
	l.mu.Unlock()
	sum := SumServerStats(servers)
	sum.Limit = l.Current().server.Stats().Limit
	return sum
}

// SumServerStats adds up every number in the Stats of servers, gauges
// included (requests still running in an old server are in flight): the
// counters of the servers the versions of a live policy built, for
// [Live.ServerStats] and grpcpolicy's, which then set Limit to the current
// server's.
func SumServerStats[S interface{ Stats() admit.Stats }](servers []S) admit.Stats {
	var sum admit.Stats
	for _, s := range servers {
		addStats(reflect.ValueOf(&sum).Elem(), reflect.ValueOf(s.Stats()))
	}
	return sum
}

// addStats adds every number of src to dst (structs and arrays of numbers,
// as admit.Stats is made).
func addStats(dst, src reflect.Value) {
	switch dst.Kind() {
	case reflect.Struct:
		for i := range dst.NumField() {
			addStats(dst.Field(i), src.Field(i))
		}
	case reflect.Array:
		for i := range dst.Len() {
			addStats(dst.Index(i), src.Index(i))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		dst.SetUint(dst.Uint() + src.Uint())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		dst.SetInt(dst.Int() + src.Int())
	case reflect.Float32, reflect.Float64:
		dst.SetFloat(dst.Float() + src.Float())
	}
}

// Watch follows the file: it watches the file's directory with fsnotify
// and, LiveDebounce after the last event, reads the file and applies it if
// its bytes changed and it is valid (as Reload does). Watching the
// directory, not the file, catches what replaces the file rather than
// writing it: an editor's rename, a deploy tool's atomic swap, and the
// symlink swap by which Kubernetes updates a mounted ConfigMap. Events
// that change nothing (the same bytes) are ignored. Watch returns once the
// watching started; Close stops it.
func (l *Live) Watch() error {
	var err error
	started := false
	l.watchOnce.Do(func() {
		var w *fsnotify.Watcher
		if w, err = fsnotify.NewWatcher(); err != nil {
			return
		}
		if err = w.Add(filepath.Dir(l.path)); err != nil {
			w.Close()
			return
		}
		started = true
		go l.watch(w)
	})
	if err != nil {
		return fmt.Errorf("policyfile: watching %s: %w", l.path, err)
	}
	if !started {
		return errors.New("policyfile: Watch called twice")
	}
	return nil
}

func (l *Live) watch(w *fsnotify.Watcher) {
	defer close(l.done)
	defer w.Close()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			t.Reset(l.o.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			l.o.log.Warn("policyfile: watching the policy file", "file", l.path, "err", err)
		case <-t.C:
			_ = l.Reload() // logged and counted
		}
	}
}

// Close stops the watching, if any, and waits for it to end. The running
// version stays usable. Close is idempotent.
func (l *Live) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(l.stop)
	started := true
	l.watchOnce.Do(func() { started = false })
	if started {
		<-l.done
	}
	return nil
}
