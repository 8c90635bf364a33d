package grpcx_test

import (
	"context"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/wire"
)

// A first try carries no stormguard-attempt (nor grpc-previous-rpc-attempts):
// absent means 1 at every stormguard server. With the default criticality
// it is sent with the caller's context as it is (its deadline travels in
// grpc-timeout, which grpc-go writes itself); retries always carry their
// number. The server, a real grpcx.Server on 127.0.0.1, counts the
// unstamped attempt as a first try: in its handler's context
// (deadline.Attempt) and in its books (Stats: Arrived, Retries, which the
// metrics' try label reads). Unary calls and server streams alike.
//
// The caller's own metadata arrives with every attempt, its keys intact,
// whether it is a map (metadata.NewOutgoingContext) or pairs appended
// (metadata.AppendToOutgoingContext), and an attempt number it carries (a
// proxy that passes its incoming metadata on), in any case, never does:
// AppendToOutgoingContext lower-cases the keys it is given, a metadata.MD
// literal keeps them as written. (grpc-go fails a call whose map has a key
// in upper case, as one that is not a valid header; such a map, once its
// attempt keys are removed, goes out with its keys in lower case.)
func TestFirstTryUnstamped(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name        string
		ctx         context.Context
		codes       []codes.Code // the backend's answers, in turn
		want        []string     // "stormguard-attempt/grpc-previous-rpc-attempts" on the wire
		wantTry     []int        // deadline.Attempt in the handler
		wantCrit    []string     // stormguard-criticality on the wire
		wantRetries uint64
		wantKeys    metadata.MD // the caller's keys, on the wire with every attempt
	}{
		{"nothing to stamp", bg, []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{""}, 0, nil},
		{"the caller's metadata", metadata.AppendToOutgoingContext(bg, "x-user", "ada"), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{""}, 0, nil},
		{"a criticality", deadline.WithCriticality(bg, wire.Sheddable), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{"sheddable"}, 0, nil},
		{"an inherited attempt number is not passed on",
			metadata.AppendToOutgoingContext(bg, "stormguard-attempt", "7", "grpc-previous-rpc-attempts", "6"), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{""}, 0, nil},
		{"retries are stamped", bg, []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK},
			[]string{"/", "2/1", "3/2"}, []int{1, 2, 3}, []string{"", "", ""}, 2, nil},
		{"retries with a criticality", deadline.WithCriticality(bg, wire.Sheddable), []codes.Code{codes.Unavailable, codes.OK},
			[]string{"/", "2/1"}, []int{1, 2}, []string{"sheddable", "sheddable"}, 1, nil},
		{"the caller's metadata in a map", metadata.NewOutgoingContext(bg, metadata.Pairs("x-user", "ada", "x-trace", "t1")), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{""}, 0, metadata.Pairs("x-user", "ada", "x-trace", "t1")},
		{"the caller's metadata in a map and appended", metadata.AppendToOutgoingContext(metadata.NewOutgoingContext(bg, metadata.Pairs("x-user", "ada")), "x-trace", "t1"),
			[]codes.Code{codes.Unavailable, codes.OK},
			[]string{"/", "2/1"}, []int{1, 2}, []string{"", ""}, 1, metadata.Pairs("x-user", "ada", "x-trace", "t1")},
		{"an inherited attempt number in mixed case, appended",
			metadata.AppendToOutgoingContext(bg, "x-user", "ada", "Stormguard-Attempt", "7", "GRPC-Previous-RPC-Attempts", "6"), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{""}, 0, metadata.Pairs("x-user", "ada")},
		{"an inherited attempt number in mixed case, in an MD literal",
			metadata.NewOutgoingContext(bg, metadata.MD{"x-user": {"ada"}, "Stormguard-Attempt": {"7"}}), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{""}, 0, metadata.Pairs("x-user", "ada")},
		{"an inherited previous-attempts count in mixed case, in an MD literal, and a retry",
			metadata.AppendToOutgoingContext(metadata.NewOutgoingContext(bg, metadata.MD{"x-user": {"ada"}, "Grpc-Previous-Rpc-Attempts": {"6"}}), "x-trace", "t1"),
			[]codes.Code{codes.Unavailable, codes.OK},
			[]string{"/", "2/1"}, []int{1, 2}, []string{"", ""}, 1, metadata.Pairs("x-user", "ada", "x-trace", "t1")},
		{"an inherited attempt number appended to the caller's map",
			metadata.AppendToOutgoingContext(metadata.NewOutgoingContext(bg, metadata.Pairs("x-user", "ada")), "STORMGUARD-ATTEMPT", "7"), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{""}, 0, metadata.Pairs("x-user", "ada")},
		{"the caller's own criticality in mixed case", metadata.NewOutgoingContext(deadline.WithCriticality(bg, wire.Sheddable),
			metadata.MD{"x-user": {"ada"}, "Stormguard-Criticality": {"critical-plus"}, "stormguard-attempt": {"3"}}), []codes.Code{codes.OK},
			[]string{"/"}, []int{1}, []string{"critical-plus"}, 0, metadata.Pairs("x-user", "ada")},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			name := "unary/" + tt.name
			if stream {
				name = "stream/" + tt.name
			}
			t.Run(name, func(t *testing.T) {
				leakcheck.Check(t)
				var (
					mu   sync.Mutex
					crit []string
					keys []metadata.MD // of wantKeys, as each attempt got them
				)
				steps := make([]step, len(tt.codes))
				for i, code := range tt.codes {
					steps[i] = step{fn: func(ctx context.Context) error {
						md, _ := metadata.FromIncomingContext(ctx)
						mu.Lock()
						crit = append(crit, first(md, "stormguard-criticality"))
						got := metadata.MD{}
						for k := range tt.wantKeys {
							if v := md.Get(k); v != nil {
								got[k] = v
							}
						}
						keys = append(keys, got)
						mu.Unlock()
						return status.Error(code, "scripted") // OK: nil
					}}
					if code == codes.OK {
						steps[i].msgs = 1
					}
				}
				b, sg := guarded(t, grpcx.ServerConfig{}, steps...)
				c := streamClient(t, b.addr, fast(t, nil))
				ctx, cancel := context.WithTimeout(tt.ctx, hostspeed.Scale(5*time.Second))
				defer cancel()
				if stream {
					s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := s.Recv(); err != nil {
						t.Fatalf("first message: %v", err)
					}
					if _, err := s.Recv(); err != io.EOF {
						t.Fatalf("end of stream: %v, want EOF", err)
					}
				} else if err := check(ctx, c); err != nil {
					t.Fatal(err)
				}
				var try []int
				for _, c := range b.seen() {
					try = append(try, c.ctxTry)
				}
				if got := b.attempts(); !slices.Equal(got, tt.want) {
					t.Errorf("attempt/previous on the wire %q, want %q", got, tt.want)
				}
				if !slices.Equal(try, tt.wantTry) {
					t.Errorf("the handler's deadline.Attempt %v, want %v", try, tt.wantTry)
				}
				mu.Lock()
				if !slices.Equal(crit, tt.wantCrit) {
					t.Errorf("stormguard-criticality on the wire %q, want %q", crit, tt.wantCrit)
				}
				for i, got := range keys {
					if !maps.EqualFunc(got, tt.wantKeys, slices.Equal) && len(got)+len(tt.wantKeys) > 0 {
						t.Errorf("attempt %d: the caller's keys on the wire %v, want %v", i+1, got, tt.wantKeys)
					}
				}
				mu.Unlock()
				if st := sg.Stats(); st.Arrived != uint64(len(tt.want)) || st.Retries != tt.wantRetries {
					t.Errorf("server counted %d arrived, %d retries; want %d, %d", st.Arrived, st.Retries, len(tt.want), tt.wantRetries)
				}
			})
		}
	}
}
