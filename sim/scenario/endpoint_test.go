package scenario

import "testing"

func TestEndpointAddr(t *testing.T) {
	for _, c := range []struct {
		in, kind, addr, path string
		ok                   bool
	}{
		{"http://127.0.0.1:8080/buy?x=1", EndpointHTTP, "127.0.0.1:8080", "/buy?x=1", true},
		{"http://127.0.0.1:8080", EndpointHTTP, "127.0.0.1:8080", "/", true},
		{"grpc://[::1]:9/pkg.Svc/Get", EndpointGRPC, "[::1]:9", "/pkg.Svc/Get", true},
		{"tcp://localhost:5432", EndpointTCP, "localhost:5432", "", true},
		{"tcp://localhost:5432/x", "", "", "", false},
		{"grpc://h:1/Svc", "", "", "", false},
		{"http://h/", "", "", "", false},
		{"http://h:0/", "", "", "", false},
		{"http://u@h:1/", "", "", "", false},
		{"ftp://h:1/", "", "", "", false},
		{"https://h:1/", "", "", "", false},
	} {
		k, a, p, err := EndpointAddr(c.in)
		if (err == nil) != c.ok || k != c.kind || a != c.addr || p != c.path {
			t.Errorf("EndpointAddr(%q) = %q %q %q %v", c.in, k, a, p, err)
		}
	}
}

func FuzzEndpointAddr(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080/buy", "grpc://h:1/a.B/C", "tcp://h:2", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, a, _, err := EndpointAddr(s)
		if err == nil && (k == "" || a == "") {
			t.Fatalf("%q: kind %q addr %q without an error", s, k, a)
		}
	})
}
