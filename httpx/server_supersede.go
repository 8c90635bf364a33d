package httpx

import (
	"io"
	"net/http"
	"strings"

	"github.com/stormguard/stormguard/supersede"
)

// Headers of request supersession (see [ServerConfig].Supersede).
const (
	// HeaderIdempotencyKey carries a request's idempotency key, as the
	// IETF httpapi draft "The Idempotency-Key HTTP Header Field" names it:
	// 1 to 255 printable ASCII characters (a UUID, say), optionally as a
	// quoted string.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderSuperseded marks an answer of supersession: "replaced" on the
	// 409 of a request a newer one with its key replaced in the queue,
	// "joined" on a response replayed from a twin in service.
	HeaderSuperseded = "Stormguard-Superseded"
)

var (
	hdrReplaced = []string{"replaced"}
	hdrJoined   = []string{"joined"}

	bodySuperseded = []byte("superseded: a newer request with the same Idempotency-Key took this one's place; its answer is that request's; do not retry this one\n")
	bodyKeyBusy    = []byte("too many requests with this Idempotency-Key already wait for the one in progress; retry after the delay\n")
)

// keyOf reads a request's idempotency key and its scope, for the gate: ""
// when the request has no key, has more than one, or a malformed one (it
// is then served as if it had none). The scope is what the request
// addresses, its method, host, path and query string, and who sends it:
// the caller as scope tells it, if set, else its credentials, the values
// of its Authorization and Cookie headers and its TLS client certificate,
// where present (see supersede.Scope).
func keyOf(r *http.Request, scope func(*http.Request) string) (key, keyScope string) {
	k, ok := IdempotencyKey(r.Header)
	if !ok {
		return "", ""
	}
	var sc supersede.Scope
	sc.Add('m', r.Method)
	sc.Add('h', r.Host)
	sc.Add('p', r.URL.EscapedPath())
	sc.Add('q', r.URL.RawQuery)
	if scope != nil {
		sc.Add('s', scope(r))
		return k, sc.String()
	}
	var cert []byte
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cert = r.TLS.PeerCertificates[0].Raw
	}
	sc.Caller(r.Header["Authorization"], r.Header["Cookie"], cert)
	return k, sc.String()
}

// IdempotencyKey returns the idempotency key of a request's header
// ([HeaderIdempotencyKey]), as the Server reads it: ok is false when there
// is none, more than one, or a malformed one (see supersede.ParseKey;
// surrounding spaces and one pair of quotes are removed).
func IdempotencyKey(h http.Header) (key string, ok bool) {
	v := h[HeaderIdempotencyKey]
	if len(v) != 1 {
		return "", false
	}
	k, err := supersede.ParseKey(v[0])
	return k, err == nil
}

// replay is a response kept to answer the requests that joined its
// request: the status, the header as it was sent, and the whole body.
type replay struct {
	status  int
	header  http.Header
	body    []byte
	noSniff bool // the header went out before any body: no Content-Type was sniffed
}

// recording keeps a replayable copy of what a handler writes: the header
// when the status is sent and the body up to max bytes. A response that
// outgrows max, is hijacked or declares trailers is not replayable.
type recording struct {
	max     int
	header  http.Header
	body    []byte
	spoilt  bool
	noSniff bool
}

// begin snapshots the header as it goes out with the status.
func (rc *recording) begin(h http.Header) {
	if rc.header == nil {
		rc.header = h.Clone()
	}
}

func (rc *recording) write(b []byte) {
	if rc.spoilt {
		return
	}
	if len(rc.body)+len(b) > rc.max {
		rc.spoilt, rc.body = true, nil
		return
	}
	rc.body = append(rc.body, b...)
}

// result returns the replay of what rw recorded, or nil if there is
// nothing fit to replay.
func (rc *recording) result(rw *statusWriter) *replay {
	if rc.spoilt || rw.hijacked {
		return nil
	}
	h := rw.Header()
	rc.begin(h) // a handler that wrote nothing sends its header now
	if _, ok := rc.header["Trailer"]; ok {
		return nil
	}
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return nil
		}
	}
	return &replay{status: rw.code(), header: rc.header, body: rc.body, noSniff: rc.noSniff}
}

// writerOnly hides a writer's ReadFrom, so that io.Copy goes through Write.
type writerOnly struct{ io.Writer }

// sendReplay answers a request that joined its twin with the twin's
// response. The header's value slices are shared with the other joiners:
// net/http only reads them, and http.Header.Clone caps each, so an append
// copies.
func sendReplay(w http.ResponseWriter, rp *replay) {
	h := w.Header()
	for k, v := range rp.header {
		h[k] = v
	}
	h[HeaderSuperseded] = hdrJoined
	if _, ok := h["Content-Type"]; !ok && rp.noSniff {
		h["Content-Type"] = nil // as the twin's: net/http neither sniffs nor sends one
	}
	w.WriteHeader(rp.status)
	_, _ = w.Write(rp.body)
}
