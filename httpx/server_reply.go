package httpx

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// Header values and bodies of the refusals, built once: the reject path
// assigns these slices to the response header and allocates nothing itself.
// net/http never modifies a header's value slice in place.
var (
	hdrInstance  = []string{wire.OverloadInstance.String()}
	hdrService   = []string{wire.OverloadService.String()}
	hdrExhausted = []string{wire.ExhaustedValue}
	hdrTextPlain = []string{"text/plain; charset=utf-8"}
	hdrNoSniff   = []string{"nosniff"}

	bodyInstance  = []byte("overloaded: this instance is busy; retry after the delay, elsewhere if you can\n")
	bodyService   = []byte("overloaded: the service is out of capacity; do not retry\n")
	bodyThrottled = []byte("too many requests from this client; retry after the delay\n")
	bodyExpired   = []byte("deadline exceeded before the request started\n")

	// hdrCriticality holds the Stormguard-Criticality values, indexed by
	// criticality − wire.Sheddable.
	hdrCriticality = [...][]string{
		{wire.Sheddable.String()},
		{wire.SheddablePlus.String()},
		{wire.Critical.String()},
		{wire.CriticalPlus.String()},
	}
)

// criticalityValue returns the header value of c as a shared slice, or a
// new one for a level this version does not know.
func criticalityValue(c wire.Criticality) []string {
	if i := int(c) - int(wire.Sheddable); 0 <= i && i < len(hdrCriticality) {
		return hdrCriticality[i]
	}
	return []string{c.String()}
}

// reply writes a refusal: a short plain-text body with the given status
// and headers.
func reply(w http.ResponseWriter, code int, overload, retryAfter []string, body []byte) {
	h := w.Header()
	h["Content-Type"] = hdrTextPlain
	h["X-Content-Type-Options"] = hdrNoSniff
	if overload != nil {
		h[wire.HeaderOverload] = overload
	}
	if retryAfter != nil {
		h[wire.HeaderRetryAfter] = retryAfter
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// refuse answers a request the gate did not admit, as its answer says:
// 429 with Retry-After for a throttled client; 503 with the service signal
// and no Retry-After when the whole service is overloaded (the kill switch,
// or ServiceSaturated); 503 with the instance signal and Retry-After for an
// overloaded instance; a plain 504, which no signal accompanies, for a
// request whose deadline passed before it started; 409 with
// Stormguard-Superseded: replaced for a request a newer twin superseded;
// the twin's response, replayed, for one that joined it. A client that
// left while its request waited gets nothing: it is gone.
func (s *Server) refuse(w http.ResponseWriter, d admit.Decision) {
	switch d.Answer {
	case admit.Throttled:
		body := bodyThrottled
		if d.Reason == admit.ShedKeyBusy {
			body = bodyKeyBusy
		}
		reply(w, http.StatusTooManyRequests, nil, s.retryAfter, body)
	case admit.ServiceOverloaded:
		reply(w, http.StatusServiceUnavailable, hdrService, nil, bodyService)
	case admit.InstanceOverloaded:
		reply(w, http.StatusServiceUnavailable, hdrInstance, s.retryAfter, bodyInstance)
	case admit.Expired:
		reply(w, http.StatusGatewayTimeout, nil, nil, bodyExpired)
	case admit.Superseded:
		w.Header()[HeaderSuperseded] = hdrReplaced
		reply(w, http.StatusConflict, nil, nil, bodySuperseded)
	case admit.Joined:
		sendReplay(w, d.Result.(*replay))
	}
}

// statusWriter records the status a handler sends, so that the server
// can tell its outcome. It keeps the optional interfaces net/http's own
// writer has (Flusher, Hijacker, io.ReaderFrom, io.StringWriter) and unwraps for
// http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool
	rec      *recording // keeps a replayable copy; nil: none
}

// started records the final status code as the response starts.
func (w *statusWriter) started(code int) {
	w.status = code
	if w.rec != nil {
		w.rec.begin(w.ResponseWriter.Header())
	}
}

// code returns the status sent, 200 if the handler wrote nothing.
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) { // 1xx but 101 are informational
		w.started(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.started(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	if w.rec != nil {
		if err != nil { // its client has gone: the copy would be cut short
			w.rec.spoilt = true
		}
		w.rec.write(b[:n])
	}
	return n, err
}

func (w *statusWriter) WriteString(str string) (int, error) {
	if w.rec != nil {
		return w.Write([]byte(str))
	}
	if w.status == 0 {
		w.started(http.StatusOK)
	}
	return io.WriteString(w.ResponseWriter, str)
}

func (w *statusWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.rec != nil { // through Write, to keep a copy
		return io.Copy(writerOnly{w}, src)
	}
	if w.status == 0 {
		w.started(http.StatusOK)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(w.ResponseWriter, src)
}

// Flush flushes the underlying writer if it can.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.started(http.StatusOK)
	}
	if w.rec != nil && len(w.rec.body) == 0 {
		w.rec.noSniff = true // the header goes out now, before any body
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hijacks the underlying connection if the writer allows it.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, b, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, b, err
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var (
	_ http.Flusher    = (*statusWriter)(nil)
	_ http.Hijacker   = (*statusWriter)(nil)
	_ io.ReaderFrom   = (*statusWriter)(nil)
	_ io.StringWriter = (*statusWriter)(nil)
)

// RelayExhausted passes a downstream "do not retry" up to this handler's
// caller, so that retries happen at one layer only. Call it when the
// handler answers its caller with a failure because a downstream call,
// made through a [Transport], failed with resp: if resp is a failure that
// says a layer below already retried (Stormguard-Retries-Exhausted, which
// the Transport sets itself when it gave up for a reason that stops the
// layers above, [retry.StopsAbove]) or that the
// whole downstream service is overloaded (Stormguard-Overload: service),
// RelayExhausted sets Stormguard-Retries-Exhausted: 1 on w and returns
// true. Call it before w.WriteHeader. Otherwise, and for a nil resp or a
// success, it changes nothing and returns false.
//
// The status the handler sends is its own choice; 502 or 503 are usual.
// For a downstream call that ended in an error rather than a response, see
// [RelayExhaustedError].
func RelayExhausted(w http.ResponseWriter, resp *http.Response) bool {
	if resp == nil || resp.StatusCode < 400 {
		return false
	}
	if !wire.ParseExhausted(resp.Header.Get(wire.HeaderRetriesExhausted)) {
		if o, _ := wire.ParseOverload(resp.Header.Get(wire.HeaderOverload)); o != wire.OverloadService {
			return false
		}
	}
	w.Header()[wire.HeaderRetriesExhausted] = hdrExhausted
	return true
}

// RelayExhaustedError is [RelayExhausted] for a downstream call that ended
// in an error: if err says retrying already stopped below (an error whose
// RetryClass is retry.RetriesExhausted or retry.ServiceOverloaded: a
// [retry.GiveUpError] that [retry.StopsAbove] says stops the layers above,
// after more than one attempt or after the budget, the kill switch, the
// breaker or the server refused a retry), it sets Stormguard-Retries-Exhausted: 1 on w
// and returns true; otherwise it returns false.
func RelayExhaustedError(w http.ResponseWriter, err error) bool {
	var c retry.Classed
	if err == nil || !errors.As(err, &c) {
		return false
	}
	if cls := c.RetryClass(); cls != retry.RetriesExhausted && cls != retry.ServiceOverloaded {
		return false
	}
	w.Header()[wire.HeaderRetriesExhausted] = hdrExhausted
	return true
}
