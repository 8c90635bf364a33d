package killswitch

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// State is the JSON form of a [Dials]' settings that the admin endpoint
// shows:
//
//	{"retries_off": false, "shed_fraction": 0.25, "limit_override": 0}
//
// LimitOverride 0 means no override.
type State struct {
	RetriesOff    bool    `json:"retries_off"`    // retries turned off
	ShedFraction  float64 `json:"shed_fraction"`  // share of traffic shed, in [0, 1]
	LimitOverride int     `json:"limit_override"` // concurrency limit override; 0: none
}

// Snapshot returns the dials' settings. The three are read one by one, so
// a snapshot taken during a change may mix old and new values.
func (d *Dials) Snapshot() State {
	o, _ := d.LimitOverride()
	return State{RetriesOff: d.RetriesDisabled(), ShedFraction: d.ShedFraction(), LimitOverride: o}
}

// change is the body of a POST or PUT: every field is optional, and only
// the fields present change.
type change struct {
	RetriesOff    *bool    `json:"retries_off"`
	ShedFraction  *float64 `json:"shed_fraction"`
	LimitOverride *int64   `json:"limit_override"`
}

// MaxLimitOverride is the largest limit override the admin endpoint
// accepts.
const MaxLimitOverride = 1 << 30

// maxAdminBody bounds the size of a change request.
const maxAdminBody = 4 << 10

// ErrEmptyToken is returned by [NewAdmin] when the token is empty: an admin
// endpoint without authentication would let anyone on the network turn
// retries off or shed all traffic.
var ErrEmptyToken = errors.New("killswitch: admin token is empty")

// admin is the handler NewAdmin returns.
type admin struct {
	d     *Dials
	token [sha256.Size]byte // SHA-256 of the token
	mu    sync.Mutex        // serialises changes, so that each applies as a whole
	lim   *authLimiter
	log   *slog.Logger
	now   func() time.Time
}

// AdminOption configures [NewAdmin].
type AdminOption func(*adminOptions)

type adminOptions struct {
	burst int
	every time.Duration
	log   *slog.Logger
}

// AuthFailureLimit sets how many requests without the right token a client
// may make: burst in a row, then one every every [DefaultAuthBurst,
// DefaultAuthEvery: 10, then one every 6 s]. A client is an IP address
// (for IPv6, its /64), taken from the connection, never from a header.
// A burst below 1, or an every of 0 or less, keeps the default.
func AuthFailureLimit(burst int, every time.Duration) AdminOption {
	return func(o *adminOptions) {
		if burst >= 1 {
			o.burst = burst
		}
		if every > 0 {
			o.every = every
		}
	}
}

// AdminLogger sets the logger of the endpoint's warnings (clients refused
// for too many failed attempts) [slog.Default()].
func AdminLogger(l *slog.Logger) AdminOption {
	return func(o *adminOptions) {
		if l != nil {
			o.log = l
		}
	}
}

// NewAdmin returns an HTTP handler through which an operator reads and turns
// the dials d during an incident. Every request must carry the header
//
//	Authorization: Bearer <token>
//
// (the scheme's case does not matter, RFC 9110 section 11.1; one or more
// spaces follow it) or it is refused with 401. The token is compared as a
// SHA-256 digest with crypto/subtle, which takes the same time whatever
// the header holds.
//
// Guessing is rate-limited per client address (see [AuthFailureLimit]):
// every request takes a token from its client's bucket before its
// credentials are looked at and gets it back if they were right, so only
// failures count; a client whose bucket is empty is answered 429 with
// Retry-After (whole seconds), its credentials unread, and a warning is
// logged (at most one per refill interval, with the count of refusals).
// Memory is bounded: at most 1024 clients are tracked; beyond, new clients
// share one bucket. Clients that share an address share a bucket: on a
// loopback listener every local process does, so a local process that
// keeps guessing can keep the operator waiting too.
//
// Then:
//
//	GET, HEAD   200 and the dials as JSON (see [State])
//	POST, PUT   a JSON object with any of the fields retries_off (bool),
//	            shed_fraction (number in [0, 1]) and limit_override
//	            (integer in [0, MaxLimitOverride], 0 to remove): the fields
//	            present are applied, then 200 and the new state as JSON.
//	            Malformed JSON, an unknown field, a value out of range or a
//	            body over 4 KiB is refused with 400 and a message that says
//	            why, and nothing changes.
//	other       405
//
// For example:
//
//	curl -H "Authorization: Bearer $TOKEN" -d '{"shed_fraction": 0.5}' http://127.0.0.1:9901/
//
// Serve it on a loopback address only: see [ListenAdmin]. NewAdmin fails
// with [ErrEmptyToken] if token is empty, and if d is nil.
func NewAdmin(d *Dials, token string, opts ...AdminOption) (http.Handler, error) {
	if token == "" {
		return nil, ErrEmptyToken
	}
	if d == nil {
		return nil, errors.New("killswitch: NewAdmin with nil dials")
	}
	o := adminOptions{burst: DefaultAuthBurst, every: DefaultAuthEvery}
	for _, f := range opts {
		f(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	return &admin{d: d, token: sha256.Sum256([]byte(token)), lim: newAuthLimiter(o.burst, o.every), log: o.log, now: time.Now}, nil
}

// bearerToken returns the token of an Authorization value of the Bearer
// scheme: the scheme in any case, one or more spaces, then a non-empty
// token (RFC 9110 section 11.4, RFC 6750 section 2.1). ok is false for
// anything else.
func bearerToken(v string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimLeft(rest, " ")
	return token, token != ""
}

// authorized reports whether the request carries exactly one Authorization
// header with the right bearer token.
func (a *admin) authorized(r *http.Request) bool {
	vs := r.Header.Values("Authorization")
	tok, ok := "", false
	if len(vs) == 1 {
		tok, ok = bearerToken(vs[0])
	}
	// Hash and compare whatever came, so that the time taken says nothing
	// about the token: not its length, not how much of it matched.
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], a.token[:]) == 1 && ok
}

func (a *admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := clientKey(r.RemoteAddr)
	now := a.now()
	if wait, ok := a.lim.takeAt(key, now); !ok {
		secs := (wait + time.Second - 1) / time.Second
		if refused, warn := a.lim.warnAt(now); warn {
			a.log.Warn("killswitch: admin endpoint: too many requests without the right token; refusing them for a while",
				"client", r.RemoteAddr, "retry_after", time.Duration(secs)*time.Second, "refused", refused)
		}
		w.Header().Set("Retry-After", strconv.FormatInt(int64(max(secs, 1)), 10))
		http.Error(w, "too many requests without a valid bearer token; try again later", http.StatusTooManyRequests)
		return
	}
	if !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="stormguard kill switch"`)
		http.Error(w, "unauthorized: a valid bearer token is required", http.StatusUnauthorized)
		return
	}
	a.lim.refundAt(key, now)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		a.show(w)
	case http.MethodPost, http.MethodPut:
		if err := a.apply(w, r); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		a.show(w)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// show writes the dials as JSON.
func (a *admin) show(w http.ResponseWriter) {
	b, err := json.Marshal(a.d.Snapshot())
	if err != nil { // a State always marshals
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// apply decodes and checks a change, then applies it whole, or returns why
// it cannot and changes nothing.
func (a *admin) apply(w http.ResponseWriter, r *http.Request) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	var c change
	if err := dec.Decode(&c); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return fmt.Errorf("body larger than %d bytes", maxAdminBody)
		}
		if errors.Is(err, io.EOF) {
			return errors.New(`empty body; want a JSON object such as {"shed_fraction": 0.5}`)
		}
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON: data after the object")
	}
	if c.RetriesOff == nil && c.ShedFraction == nil && c.LimitOverride == nil {
		return errors.New("no field to change; want any of retries_off, shed_fraction, limit_override")
	}
	var errs []string
	if f := c.ShedFraction; f != nil && !(*f >= 0 && *f <= 1) {
		errs = append(errs, fmt.Sprintf("shed_fraction must be in [0, 1], got %v", *f))
	}
	if l := c.LimitOverride; l != nil && (*l < 0 || *l > MaxLimitOverride) {
		errs = append(errs, fmt.Sprintf("limit_override must be in [0, %d] (0 removes it), got %d", MaxLimitOverride, *l))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if c.ShedFraction != nil {
		if err := a.d.SetShedFraction(*c.ShedFraction); err != nil { // checked above
			return err
		}
	}
	if c.LimitOverride != nil {
		if err := a.d.SetLimitOverride(int(*c.LimitOverride)); err != nil { // checked above
			return err
		}
	}
	if c.RetriesOff != nil {
		a.d.SetRetriesDisabled(*c.RetriesOff)
	}
	return nil
}

// ListenOption configures [ListenAdmin].
type ListenOption func(*listenOptions)

type listenOptions struct {
	allowNonLoopback bool
	log              *slog.Logger
}

// AllowNonLoopback lets [ListenAdmin] listen on an address other than a
// loopback one. Only do so behind a network that only operators reach:
// the bearer token is then all that stands between the network and the
// kill switch, and it travels in clear text over plain HTTP.
func AllowNonLoopback() ListenOption {
	return func(o *listenOptions) { o.allowNonLoopback = true }
}

// ListenLogger sets the logger of ListenAdmin's warning about a
// non-loopback address [slog.Default()].
func ListenLogger(l *slog.Logger) ListenOption {
	return func(o *listenOptions) {
		if l != nil {
			o.log = l
		}
	}
}

// ErrNotLoopback is wrapped by the error of [ListenAdmin] for an address
// that is not a loopback one (without [AllowNonLoopback]).
var ErrNotLoopback = errors.New("killswitch: admin address is not a loopback address")

// ListenAdmin opens a TCP listener for the admin endpoint at addr
// ("host:port"), on loopback only: the host must be a loopback IP address
// (127.0.0.1, ::1 …) or "localhost"; an empty host (":9901") means
// 127.0.0.1, with or without options. Any other host fails with an error
// that wraps [ErrNotLoopback], unless the option [AllowNonLoopback] is
// given; every interface must then be named, "0.0.0.0:9901" or
// "[::]:9901", and ListenAdmin logs a warning (see [ListenLogger]) that
// says where it listens. Serve the handler of [NewAdmin] on it:
//
//	ln, err := killswitch.ListenAdmin("127.0.0.1:9901")
//	…
//	go http.Serve(ln, adminHandler)
//
// The caller closes the listener.
func ListenAdmin(addr string, opts ...ListenOption) (net.Listener, error) {
	var o listenOptions
	for _, f := range opts {
		f(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("killswitch: admin address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1" // never every interface by omission
	}
	if !o.allowNonLoopback && !isLoopbackHost(host) {
		return nil, fmt.Errorf("%w: %q (use AllowNonLoopback to listen on it anyway)", ErrNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("killswitch: admin listener: %w", err)
	}
	// "localhost" is resolved by the system: check where it went.
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		if !o.allowNonLoopback {
			ln.Close()
			return nil, fmt.Errorf("%w: %q resolved to %v", ErrNotLoopback, addr, ln.Addr())
		}
		o.log.Warn("killswitch: admin endpoint listens on a non-loopback address: anyone who reaches it and has the token, sent in clear text, can turn the kill switch",
			"addr", ln.Addr().String())
	}
	return ln, nil
}

// isLoopbackHost reports whether host names a loopback address without a
// lookup: "localhost" or a loopback IP literal.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
