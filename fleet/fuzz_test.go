package fleet

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/killswitch"
)

// The fuzz targets feed the parsers of what Redis sends back: the sync
// scripts' replies, the peek script's reply and the dials (hash and
// announcements). A reply is a list of values as go-redis decodes them
// (string, int64, nil, nested lists, and for RESP3 doubles), encoded for
// the fuzzer by encodeValues.

// encodeValues writes v as tagged items: 's' len16 bytes, 'i' int64, 'n',
// 'f' float64, 'l' (an empty list).
func encodeValues(v []any) []byte {
	var b []byte
	for _, x := range v {
		switch x := x.(type) {
		case string:
			b = append(b, 's')
			b = binary.BigEndian.AppendUint16(b, uint16(len(x)))
			b = append(b, x...)
		case int64:
			b = append(b, 'i')
			b = binary.BigEndian.AppendUint64(b, uint64(x))
		case nil:
			b = append(b, 'n')
		case float64:
			b = append(b, 'f')
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(x))
		default:
			b = append(b, 'l')
		}
	}
	return b
}

// decodeValues reads what encodeValues wrote, stopping at the first
// malformed item, at most 32 items.
func decodeValues(b []byte) []any {
	var v []any
	for len(b) > 0 && len(v) < 32 {
		tag := b[0]
		b = b[1:]
		switch tag {
		case 's':
			if len(b) < 2 {
				return v
			}
			n := int(binary.BigEndian.Uint16(b))
			b = b[2:]
			if len(b) < n {
				return v
			}
			v = append(v, string(b[:n]))
			b = b[n:]
		case 'i', 'f':
			if len(b) < 8 {
				return v
			}
			u := binary.BigEndian.Uint64(b)
			b = b[8:]
			if tag == 'i' {
				v = append(v, int64(u))
			} else {
				v = append(v, math.Float64frombits(u))
			}
		case 'n':
			v = append(v, nil)
		case 'l':
			v = append(v, []any{})
		default:
			return v
		}
	}
	return v
}

// replyValues is r as the scripts send it.
func replyValues(r reply) []any {
	dup := int64(0)
	if r.dup {
		dup = 1
	}
	return []any{r.gen, r.grant, r.adj, r.a, r.b, r.live, dup, r.now, r.ver, r.peak, r.avail, r.note}
}

func FuzzParseReply(f *testing.F) {
	for _, r := range []reply{
		{gen: "1796162008.793610.p1", grant: 28000, a: 444000, b: 56000, live: 2, now: 1796162008793, ver: 3, peak: 2, avail: 444000, note: "created"},
		{gen: "1.000002.x", grant: -14000, adj: -100000, a: -5000, b: 505000, live: 1, dup: true, now: 1, ver: 1, peak: 5, note: "corrupt: pool = \"abc\""},
		{gen: "g", live: 0, note: "stale"},
		{gen: "g", grant: math.MinInt64, a: math.MinInt64},
	} {
		f.Add(encodeValues(replyValues(r)))
	}
	f.Add(encodeValues([]any{"g", int64(1), int64(2)}))
	f.Add(encodeValues([]any{nil, int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), ""}))
	f.Add(encodeValues([]any{"g", 1.5, int64(0), int64(0), int64(0), int64(0), int64(2), int64(0), int64(0), int64(0), int64(0), []any{}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := decodeValues(data)
		r, err := parseReply(v)
		if err != nil {
			if r != (reply{}) {
				t.Fatalf("an error with a reply: %+v", r)
			}
			return
		}
		if r.gen == "" || strings.ContainsAny(r.gen, " \t\r\n") {
			t.Fatalf("generation %q accepted", r.gen)
		}
		if r.live < 0 || r.peak < 0 || r.ver < 0 || r.avail < 0 || r.avail > maxAmount {
			t.Fatalf("counts out of range accepted: %+v", r)
		}
		for _, x := range []int64{r.grant, r.adj, r.a, r.b} {
			if x > maxAmount || x < -maxAmount {
				t.Fatalf("amount %d accepted: %+v", x, r)
			}
		}
		again, err := parseReply(replyValues(r))
		if err != nil || again != r {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, r)
		}
	})
}

func FuzzParsePeek(f *testing.F) {
	now := int64(1796162008793)
	for _, v := range [][]any{
		{"token-bucket 500000 14000/5000/14000 1000 true", "g", int64(math.MinInt64), int64(0), int64(1), now, int64(0), int64(1), ""},
		{"token-bucket 500000 14000/5000/14000 1000 true", "1796162008.793610.p1", int64(444000), int64(56000), int64(2), now, int64(0), int64(7), ""},
		{"token-bucket 500000 14000/5000/14000 1000 true", "g", int64(0), int64(-98000), int64(1), now, now + 3000, int64(2), ""},
		{"window 1000000 500000 0", "g", int64(200), int64(100000), int64(2), now, int64(0), int64(9), ""},
		{nil, nil, int64(0), int64(0), int64(0), now, int64(0), int64(0), ""},
		{nil, nil, int64(0), int64(0), int64(0), now, int64(0), int64(0), "the key holds a string"},
		{"window 0 0 0", "g", int64(0), int64(0), int64(0), now, int64(0), int64(0), ""},
		{"concurrency 5", "g", int64(0), int64(0), int64(0), now, int64(0), int64(0), ""},
	} {
		f.Add(encodeValues(v))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lv, err := parsePeek(decodeValues(data))
		for _, x := range []float64{lv.Capacity, lv.Tokens, lv.Pool, lv.Held, lv.Retries, lv.Allowed} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("a level with %v: %+v", x, lv)
			}
		}
		if lv.Processes < 0 || lv.Version < 0 || lv.Window < 0 {
			t.Fatalf("negative count: %+v", lv)
		}
		if err != nil {
			return
		}
		switch {
		case !lv.Exists:
			if lv.Kind != "" || lv.Processes != 0 {
				t.Fatalf("a budget that does not exist has a kind or processes: %+v", lv)
			}
		case lv.Kind == budget.KindTokenBucket:
			if lv.Tokens != lv.Pool+lv.Held || lv.Capacity < 0 {
				t.Fatalf("inconsistent bucket: %+v", lv)
			}
		case lv.Kind == budget.KindWindow:
			if lv.Window > 10*time.Hour || lv.Allowed < 0 {
				t.Fatalf("window out of range: %+v", lv)
			}
		default:
			t.Fatalf("a budget of kind %q parsed: %+v", lv.Kind, lv)
		}
		if !lv.Probation.IsZero() && !lv.Probation.After(lv.ServerTime) {
			t.Fatalf("a probation that ended: %+v", lv)
		}
	})
}

// dialsPayload is s as the dials script announces it.
func dialsPayload(s DialsState) string {
	off, updated := 0, int64(0)
	if s.RetriesOff {
		off = 1
	}
	if !s.Updated.IsZero() {
		updated = s.Updated.UnixMilli()
	}
	return fmt.Sprintf("v2 %d %d %d %d %d %d", off, int64(math.Round(s.ShedFraction*1e6)), s.LimitOverride, s.Version, updated, s.Epoch)
}

func FuzzParseDials(f *testing.F) {
	for _, p := range []string{
		"v2 1 250000 0 3 1796162008793 1796162008793610",
		"v2 0 0 40 1 0 0",
		"v1 1 500000 0 1 1796162008793",
		"v1 1 2000000 0 1 0",
		"v2 1 0 0 1 0 -5",
		"v2 0 0 0 0 0 0 extra",
		"v2 +1 0 0 1 0 0",
		"v2\t0\n0 0 1 0 0",
		"",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		s, err := parseDials(p)
		if err != nil {
			if s != (DialsState{}) {
				t.Fatalf("an error with a state: %+v", s)
			}
			return
		}
		if !(s.ShedFraction >= 0 && s.ShedFraction <= 1) || s.LimitOverride < 0 || s.LimitOverride > killswitch.MaxLimitOverride || s.Version < 0 || s.Epoch < 0 {
			t.Fatalf("%q parsed out of range: %+v", p, s)
		}
		again, err := parseDials(dialsPayload(s))
		if err != nil || again != s {
			t.Fatalf("%q: round trip %+v, %v; want %+v", p, again, err, s)
		}
	})
}
