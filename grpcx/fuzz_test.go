package grpcx_test

import (
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/wire"
)

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		name            string
		header, trailer metadata.MD
		pushMS          int64 // -1: none
		bad, exh        bool
		overload        wire.Overload
	}{
		{name: "none", pushMS: -1},
		{name: "pushback", trailer: metadata.Pairs(wire.KeyGRPCRetryPushback, "250"), pushMS: 250},
		{name: "pushback-zero", trailer: metadata.Pairs(wire.KeyGRPCRetryPushback, "0"), pushMS: 0},
		{name: "pushback-negative", trailer: metadata.Pairs(wire.KeyGRPCRetryPushback, "-1"), pushMS: -1, bad: true},
		{name: "pushback-twice", trailer: metadata.Pairs(wire.KeyGRPCRetryPushback, "1", wire.KeyGRPCRetryPushback, "2"), pushMS: -1, bad: true},
		{name: "pushback-in-header", header: metadata.Pairs(wire.KeyGRPCRetryPushback, "7"), pushMS: 7},
		{name: "trailer-wins", header: metadata.Pairs(wire.KeyGRPCRetryPushback, "x"), trailer: metadata.Pairs(wire.KeyGRPCRetryPushback, "9"), pushMS: 9},
		{name: "service", trailer: metadata.Pairs("stormguard-overload", "Service"), pushMS: -1, overload: wire.OverloadService},
		{name: "unknown-overload", trailer: metadata.Pairs("stormguard-overload", "region"), pushMS: -1, overload: wire.OverloadInstance},
		{name: "exhausted", header: metadata.Pairs("stormguard-retries-exhausted", "true"), pushMS: -1, exh: true},
		{name: "not-exhausted", trailer: metadata.Pairs("stormguard-retries-exhausted", "0"), pushMS: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := grpcx.ParseSignal(tc.header, tc.trailer)
			if s.HasPushback != (tc.pushMS >= 0) || (s.HasPushback && s.Pushback.Milliseconds() != tc.pushMS) {
				t.Errorf("pushback = %v (has %v), want %d ms", s.Pushback, s.HasPushback, tc.pushMS)
			}
			if s.BadPushback != tc.bad || s.Exhausted != tc.exh || s.Overload != tc.overload {
				t.Errorf("signal = %+v, want bad %v, exhausted %v, overload %v", s, tc.bad, tc.exh, tc.overload)
			}
		})
	}
}

// FuzzParseSignal checks ParseSignal's invariants on any metadata values:
// it never panics; a pushback is either well formed (and then within
// [0, wire.MaxPushback]) or bad, never both; every key agrees with wire's
// parser of its value; the trailer's value wins over the header's.
func FuzzParseSignal(f *testing.F) {
	f.Add("250", "instance", "1", "x")
	f.Add("-1", "service", "true", "")
	f.Add("", "", "", "99999999999999999999")
	f.Add("1.5", "SERVICE", "yes", "0")
	f.Fuzz(func(t *testing.T, push, overload, exhausted, headerPush string) {
		trailer := metadata.MD{}
		if push != "" {
			trailer[wire.KeyGRPCRetryPushback] = []string{push}
		}
		if overload != "" {
			trailer["stormguard-overload"] = []string{overload}
		}
		if exhausted != "" {
			trailer["stormguard-retries-exhausted"] = []string{exhausted}
		}
		header := metadata.MD{wire.KeyGRPCRetryPushback: {headerPush}}
		s := grpcx.ParseSignal(header, trailer)

		if s.HasPushback && s.BadPushback {
			t.Fatalf("pushback both good and bad: %+v", s)
		}
		if s.HasPushback && (s.Pushback < 0 || s.Pushback > wire.MaxPushback) {
			t.Fatalf("pushback %v out of range", s.Pushback)
		}
		value := push
		if value == "" {
			value = headerPush // the trailer has none: the header's counts
		}
		d, ok := wire.ParseMillis(value)
		if s.HasPushback != ok || s.BadPushback == ok || (ok && s.Pushback != d) {
			t.Fatalf("pushback %q: signal %+v, wire.ParseMillis = %v, %v", value, s, d, ok)
		}
		o, ok := wire.ParseOverload(overload)
		if !ok {
			o = wire.OverloadInstance
		}
		if s.Overload != o {
			t.Fatalf("overload %q: got %v, want %v", overload, s.Overload, o)
		}
		if s.Exhausted != wire.ParseExhausted(exhausted) {
			t.Fatalf("exhausted %q: got %v", exhausted, s.Exhausted)
		}
	})
}
