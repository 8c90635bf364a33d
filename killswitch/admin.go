package killswitch

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
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

// MinTokenLength is the shortest admin token NewAdmin takes without a
// warning: 16 bytes, 128 bits if they are random.
const MinTokenLength = 16

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
// Credentials are checked first, and a request with the right token is
// served whatever else its address sends: the operator is never locked out
// by another client on the same address (on a loopback listener every
// local process shares one). Only failed attempts are limited, per client
// address (see [AuthFailureLimit]): each takes a token from its client's
// bucket, and one whose bucket is empty is answered 429 with Retry-After
// (whole seconds) instead of 401, and a warning is logged (at most one per
// refill interval, with the count of refusals). The limit slows guessing
// down and keeps the log quiet; it cannot stop a guesser from learning
// whether a guess was right, since a right token is always served, so use
// a long random token (NewAdmin logs a warning for one shorter than
// [MinTokenLength] bytes). Memory is bounded: at most 1024 clients are
// tracked; beyond, new clients share one bucket.
//
// Then:
//
//	GET, HEAD   200 and the dials as JSON (see [State])
//	POST, PUT   a JSON object with any of the fields retries_off (bool),
//	            shed_fraction (number in [0, 1]) and limit_override
//	            (integer in [0, MaxLimitOverride], 0 to remove): the fields
//	            present are applied, then 200 and the new state as JSON.
//	            The JSON is read strictly: malformed JSON, a field that is
//	            unknown, given twice or spelled in another case
//	            ("Retries_Off"), a null, a value of the wrong type or out
//	            of range, data after the object or a body over 4 KiB is
//	            refused with 400 and a message that says why, and nothing
//	            changes.
//	other       405
//
// For example:
//
//	curl -H "Authorization: Bearer $TOKEN" -d '{"shed_fraction": 0.5}' http://127.0.0.1:9901/
//
// Every change is recorded on d as made locally, by the client's address
// (see [Dials.LastChange]), and logged at level Info.
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
	if len(token) < MinTokenLength {
		o.log.Warn("killswitch: admin token is short: only failed attempts are rate-limited, so a short token can be guessed; use a long random one",
			"length", len(token), "want_at_least", MinTokenLength)
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
	if !a.authorized(r) {
		// Only failures are charged: a right token never waits behind
		// another client's guesses.
		now := a.now()
		if wait, ok := a.lim.takeAt(clientKey(r.RemoteAddr), now); !ok {
			secs := (wait + time.Second - 1) / time.Second
			if refused, warn := a.lim.warnAt(now); warn {
				a.log.Warn("killswitch: admin endpoint: too many requests without the right token; refusing them for a while",
					"client", r.RemoteAddr, "retry_after", time.Duration(secs)*time.Second, "refused", refused)
			}
			w.Header().Set("Retry-After", strconv.FormatInt(int64(max(secs, 1)), 10))
			http.Error(w, "too many requests without a valid bearer token; try again later", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="stormguard kill switch"`)
		http.Error(w, "unauthorized: a valid bearer token is required", http.StatusUnauthorized)
		return
	}
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return fmt.Errorf("body larger than %d bytes", maxAdminBody)
		}
		return fmt.Errorf("reading the body: %v", err)
	}
	c, err := decodeChange(body)
	if err != nil {
		return err
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
	by := "admin " + r.RemoteAddr
	a.d.NoteChange(Change{At: a.now(), Origin: OriginLocal, By: by})
	st := a.d.Snapshot()
	a.log.Info("killswitch: dials changed through the admin endpoint", "by", by,
		"retries_off", st.RetriesOff, "shed_fraction", st.ShedFraction, "limit_override", st.LimitOverride)
	return nil
}

// changeFields are the names a change may give, exactly as written.
var changeFields = []string{"retries_off", "shed_fraction", "limit_override"}

// decodeChange reads a change strictly: one JSON object whose keys are
// changeFields, each at most once and in their exact case, none null, and
// nothing after it. encoding/json alone takes a duplicate key (the last
// wins) and matches names without regard to case; an operator's typo must
// not change a dial silently.
func decodeChange(body []byte) (change, error) {
	var c change
	if len(bytes.TrimSpace(body)) == 0 {
		return c, errors.New(`empty body; want a JSON object such as {"shed_fraction": 0.5}`)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil {
		return c, fmt.Errorf("invalid JSON: %v", err)
	} else if tok != json.Delim('{') {
		return c, fmt.Errorf("want a JSON object, got %v", tokenText(tok))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return c, fmt.Errorf("invalid JSON: %v", err)
		}
		key := tok.(string) // an object's keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return c, fmt.Errorf("invalid JSON: %v", err)
		}
		switch {
		case !slices.Contains(changeFields, key):
			for _, f := range changeFields {
				if strings.EqualFold(f, key) {
					return c, fmt.Errorf("unknown field %q (field names are lower case: %s)", key, f)
				}
			}
			return c, fmt.Errorf("unknown field %q (want any of %s)", key, strings.Join(changeFields, ", "))
		case seen[key]:
			return c, fmt.Errorf("field %q given twice", key)
		case string(raw) == "null":
			return c, fmt.Errorf("field %q is null; leave it out to keep its value", key)
		}
		seen[key] = true
		var err2 error
		switch key {
		case "retries_off":
			c.RetriesOff = new(bool)
			err2 = json.Unmarshal(raw, c.RetriesOff)
		case "shed_fraction":
			c.ShedFraction = new(float64)
			err2 = json.Unmarshal(raw, c.ShedFraction)
		case "limit_override":
			c.LimitOverride = new(int64)
			err2 = json.Unmarshal(raw, c.LimitOverride)
		}
		if err2 != nil {
			return c, fmt.Errorf("field %q: %s is not a %s", key, raw, map[string]string{
				"retries_off": "boolean", "shed_fraction": "number", "limit_override": "whole number"}[key])
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return c, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return c, errors.New("invalid JSON: data after the object")
	}
	if c.RetriesOff == nil && c.ShedFraction == nil && c.LimitOverride == nil {
		return c, errors.New("no field to change; want any of retries_off, shed_fraction, limit_override")
	}
	return c, nil
}

// tokenText describes a JSON token for an error.
func tokenText(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return string(v)
	case string:
		return strconv.Quote(v)
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
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
