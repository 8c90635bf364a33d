package grpcx

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// TestStamp: every way of stamping an attempt gives the attempt's context
// the caller's metadata and this layer's keys, whatever the caller had; a
// first try carries no attempt number. The caller's keys are found in
// any case, by the one-pass read of grpc-go's value and by the slower
// path through metadata's functions that stands in when that value is
// not what this package learnt at start.
func TestStamp(t *testing.T) {
	if outgoingKey == nil {
		t.Fatal("the outgoing metadata's context key was not learnt: every call takes the slow path")
	}
	if rawType == nil {
		t.Fatal("grpc-go's outgoing value was not learnt: every call with outgoing metadata takes the slow path")
	}
	bg := context.Background()
	shed := deadline.WithCriticality(bg, wire.Sheddable)
	tests := []struct {
		name string
		ctx  context.Context
		mode stampMode
		n    int
		want metadata.MD
	}{
		{"no metadata, first try", bg, stampShared, 1, nil},
		{"no metadata, first try, criticality", shed, stampShared, 1, metadata.Pairs("stormguard-criticality", "sheddable")},
		{"no metadata, third try", bg, stampShared, 3, metadata.Pairs("stormguard-attempt", "3", "grpc-previous-rpc-attempts", "2")},
		{"no metadata, criticality", shed, stampShared, 2,
			metadata.Pairs("stormguard-attempt", "2", "grpc-previous-rpc-attempts", "1", "stormguard-criticality", "sheddable")},
		{"no metadata, past the shared maps", bg, stampShared, sharedAttempts + 4,
			metadata.Pairs("stormguard-attempt", "12", "grpc-previous-rpc-attempts", "11")},
		{"the caller's metadata, first try", metadata.AppendToOutgoingContext(bg, "x-user", "ada"), stampAppend, 1,
			metadata.Pairs("x-user", "ada")},
		{"the caller's metadata, first try, criticality", metadata.AppendToOutgoingContext(shed, "x-user", "ada"), stampAppend, 1,
			metadata.Pairs("x-user", "ada", "stormguard-criticality", "sheddable")},
		{"the caller's metadata in a map, a retry", metadata.NewOutgoingContext(shed, metadata.Pairs("x-user", "ada")), stampAppend, 2,
			metadata.Pairs("x-user", "ada", "stormguard-attempt", "2", "grpc-previous-rpc-attempts", "1", "stormguard-criticality", "sheddable")},
		{"the caller's own criticality", metadata.AppendToOutgoingContext(shed, "stormguard-criticality", "critical-plus"), stampAppend, 2,
			metadata.Pairs("stormguard-criticality", "critical-plus", "stormguard-attempt", "2", "grpc-previous-rpc-attempts", "1")},
		{"an inherited attempt number", metadata.AppendToOutgoingContext(bg, "x-user", "ada", "Stormguard-Attempt", "7", "grpc-previous-rpc-attempts", "6"), stampCopy, 1,
			metadata.Pairs("x-user", "ada")},
		{"an inherited attempt number, a retry", metadata.NewOutgoingContext(bg, metadata.Pairs("grpc-previous-rpc-attempts", "6")), stampCopy, 2,
			metadata.Pairs("stormguard-attempt", "2", "grpc-previous-rpc-attempts", "1")},
		{"an inherited attempt number in an MD literal", metadata.NewOutgoingContext(bg, metadata.MD{"x-user": {"ada"}, "Stormguard-ATTEMPT": {"7"}}), stampCopy, 1,
			metadata.Pairs("x-user", "ada")},
		{"the caller's own criticality in an MD literal", metadata.NewOutgoingContext(shed, metadata.MD{"STORMGUARD-CRITICALITY": {"critical-plus"}}), stampAppend, 2,
			metadata.Pairs("stormguard-criticality", "critical-plus", "stormguard-attempt", "2", "grpc-previous-rpc-attempts", "1")},
		{"keys as long as stormguard's", metadata.AppendToOutgoingContext(metadata.NewOutgoingContext(shed, metadata.Pairs("x-stormguard-attempt", "7")),
			"stormguard-attempts", "6", "stormguard-criticalit", "x", "grpc-previous-rpc-attempt", "5"), stampAppend, 1,
			metadata.Pairs("x-stormguard-attempt", "7", "stormguard-attempts", "6", "stormguard-criticalit", "x", "grpc-previous-rpc-attempt", "5",
				"stormguard-criticality", "sheddable")},
	}
	learnt := rawType
	defer func() { rawType = learnt }()
	for _, slow := range []bool{false, true} {
		if slow {
			rawType = nil
		}
		for _, tt := range tests {
			st := newStamp(tt.ctx)
			if st.mode != tt.mode {
				t.Errorf("%s (slow path %v): mode %d, want %d", tt.name, slow, st.mode, tt.mode)
			}
			got, _ := metadata.FromOutgoingContext(st.context(tt.ctx, tt.n))
			if !maps.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("%s (slow path %v): attempt %d's metadata = %v, want %v", tt.name, slow, tt.n, got, tt.want)
			}
		}
	}
	rawType = learnt
	// A stamped context is the caller's in every other way.
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(bg, key{}, "v"))
	if actx := newStamp(ctx).context(ctx, 1); actx != ctx {
		t.Errorf("a first try with nothing to stamp got %T, want the caller's context itself", actx)
	}
	actx := newStamp(ctx).context(ctx, 2)
	if _, ok := actx.(*stampedCtx); !ok || actx.Value(key{}) != "v" {
		t.Fatalf("%T: value %v; want a stampedCtx that sees the caller's values", actx, actx.Value(key{}))
	}
	cancel()
	if actx.Err() != context.Canceled {
		t.Errorf("Err after the caller's cancel = %v", actx.Err())
	}
}

// TestUnarySuccessAllocs: a unary call whose first attempt succeeds
// allocates nothing when there is nothing to stamp (the first try carries
// no attempt number), from a caller with outgoing metadata too, and once
// (the attempt's context) to send a criticality.
func TestUnarySuccessAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("the race detector and coverage change allocation counts")
	}
	p, _ := retry.Preset("stormguard")
	icpt := UnaryClientInterceptor(retry.MustNew(p))
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	bg := context.Background()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want float64
	}{
		{"no metadata", bg, 0},
		{"the caller's metadata", metadata.AppendToOutgoingContext(bg, "authorization", "Bearer x"), 0},
		{"the caller's metadata in a map", metadata.NewOutgoingContext(bg, metadata.Pairs("authorization", "Bearer x", "traceparent", "00-1-2-01")), 0},
		{"a criticality", deadline.WithCriticality(bg, wire.Sheddable), 1},
	} {
		n := testing.AllocsPerRun(1000, func() {
			if err := icpt(tt.ctx, "/svc/M", nil, nil, nil, invoker); err != nil {
				t.Fatal(err)
			}
		})
		if n != tt.want {
			t.Errorf("%s: %v allocations per call; want %v", tt.name, n, tt.want)
		}
	}
}

// TestCapture: a capture taken is the call's alone (two taken at once are
// two), comes with the caller's options after its own two, and goes back
// holding nothing of the call's; a goroutine making one call after another
// gets the same one back from its slot.
func TestCapture(t *testing.T) {
	opt := grpc.WaitForReady(true)
	a := getCapture([]grpc.CallOption{opt})
	b := getCapture(nil)
	if a == b {
		t.Fatal("two captures taken at once are the same")
	}
	if len(a.opts) != 3 || a.opts[2] != opt || len(b.opts) != 2 {
		t.Fatalf("options: %d and %d, want 3 (the caller's last) and 2", len(a.opts), len(b.opts))
	}
	a.header, a.trailer = metadata.Pairs("k", "v"), metadata.Pairs("t", "v")
	a.put()
	b.put()
	if a.header != nil || a.trailer != nil || len(a.opts) != 2 || a.opts[:3][2] != nil {
		t.Errorf("a capture given back holds %v, %v, %d options (the third %v)", a.header, a.trailer, len(a.opts), a.opts[:3][2])
	}
	c := getCapture(nil)
	defer c.put()
	if c != a && c != b {
		t.Error("the goroutine's slot did not give back its capture")
	}
	if c.header != nil || c.trailer != nil || len(c.opts) != 2 {
		t.Errorf("a capture taken again holds %v, %v, %d options", c.header, c.trailer, len(c.opts))
	}
}

// FuzzStampKeys: the one-pass read of the caller's outgoing metadata (a
// proxy's may be what its own caller sent) finds stormguard's keys exactly
// when one of the caller's keys equals one of them up to ASCII case, in a
// map, appended, or both; and for keys in ASCII it agrees with
// metadata.ValueFromOutgoingContext, the slow path. (strings.EqualFold,
// which that path uses, also folds ſ to s and K to k; keys with them are
// not valid gRPC keys, which grpc-go refuses to send.)
func FuzzStampKeys(f *testing.F) {
	f.Add("x-user\nStormguard-Attempt", "grpc-previous-rpc-attempts\nauthorization", byte(1))
	f.Add("", "STORMGUARD-CRITICALITY", byte(0))
	f.Add("stormguard-attempts\nſtormguard-attempt", "stormguard-criticalit", byte(2))
	f.Add("a\nb\nc", "", byte(3))
	f.Fuzz(func(t *testing.T, inMap, appended string, split byte) {
		if rawType == nil {
			t.Skip("grpc-go's outgoing value was not learnt")
		}
		ctx := context.Background()
		var all []string
		if inMap != "" {
			md := metadata.MD{}
			for _, k := range strings.Split(inMap, "\n") {
				md[k] = append(md[k], "v")
				all = append(all, k)
			}
			ctx = metadata.NewOutgoingContext(ctx, md)
		}
		if appended != "" {
			keys := strings.Split(appended, "\n")
			at := int(split) % (len(keys) + 1) // appended in two calls
			for _, part := range [][]string{keys[:at], keys[at:]} {
				var kv []string
				for _, k := range part {
					kv = append(kv, k, "v")
					all = append(all, strings.ToLower(k)) // as AppendToOutgoingContext keeps it
				}
				ctx = metadata.AppendToOutgoingContext(ctx, kv...)
			}
		}
		var want uint8
		ascii := true
		for _, k := range all {
			switch {
			case asciiFold(k, "stormguard-attempt"), asciiFold(k, "grpc-previous-rpc-attempts"):
				want |= keyAttempts
			case asciiFold(k, "stormguard-criticality"):
				want |= keyCrit
			}
			for i := range len(k) {
				ascii = ascii && k[i] < 0x80
			}
		}
		var got uint8
		if v := ctx.Value(outgoingKey); v != nil {
			raw := rawOf(v)
			if raw == nil {
				t.Fatalf("%T under the outgoing key is not the type learnt at start", v)
			}
			if len(raw.md) > 0 || raw.mayHaveKeys() {
				got = raw.keys()
			}
		}
		if got != want {
			t.Errorf("keys %q: the one-pass read found %02b, want %02b", all, got, want)
		}
		if slow := valueKeys(ctx); ascii && slow != got {
			t.Errorf("keys %q: the one-pass read found %02b, metadata's functions %02b", all, got, slow)
		}
	})
}

// asciiFold reports whether a and b are equal up to the case of ASCII
// letters.
func asciiFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
