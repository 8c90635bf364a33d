package httpx

import (
	"context"
	"io"
	"net/http"
)

// drainLimit bounds how much of a discarded response body is read so that
// its connection can be reused; a longer body is closed unread, which costs
// the connection but not the time to read it.
const drainLimit = 64 << 10

// discard drains (up to drainLimit bytes) and closes a response that will
// not reach the caller.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	if resp.ContentLength <= drainLimit { // -1 (unknown) included
		_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	}
	_ = resp.Body.Close()
}

// closeBody closes a request body the Transport will not hand to the base
// transport, as the RoundTripper contract requires.
func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}

// cancelBody is a response body that releases its attempt's context when
// it is closed or read to the end, so that the body of a successful attempt
// with a timeout stays readable after RoundTrip returns.
type cancelBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

// rwCancelBody keeps the io.Writer of a 101 Switching Protocols body.
type rwCancelBody struct {
	cancelBody
	w io.Writer
}

func (b *rwCancelBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// withCancel wraps body so that closing it calls cancel.
func withCancel(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if w, ok := body.(io.Writer); ok {
		return &rwCancelBody{cancelBody{body, cancel}, w}
	}
	return &cancelBody{body, cancel}
}
