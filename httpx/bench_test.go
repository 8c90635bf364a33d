package httpx_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/retry"
)

// BenchmarkTransport compares a round trip to a loopback server through a
// bare http.Transport with one through the retrying Transport over it, on
// the success path (the server always answers 200).
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p, err := retry.Preset("stormguard")
	if err != nil {
		b.Fatal(err)
	}
	for _, bb := range []struct {
		name string
		rt   func(http.RoundTripper) http.RoundTripper
	}{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"stormguard", func(base http.RoundTripper) http.RoundTripper {
			return httpx.NewTransport(base, retry.MustNew(p))
		}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			rt := bb.rt(base)
			ctx, cancel := context.WithTimeout(context.Background(), 1<<40)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
