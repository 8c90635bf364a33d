package fleet

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet/alloc"
	"github.com/stormguard/stormguard/killswitch"
)

// The fuzz targets feed the parsers of what Redis sends back: the step
// script's replies, the peek script's reply and the dials (hash and
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

// answerValues is a as the step script sends it.
func answerValues(a alloc.Answer) []any {
	dup := int64(0)
	if a.Dup {
		dup = 1
	}
	return []any{a.Gen, a.Ver, a.Grant, a.Next, a.Avail, a.Live, a.Waiting, a.Lost, dup, a.Now, a.Note}
}

func FuzzParseAnswer(f *testing.F) {
	for _, a := range []alloc.Answer{
		{Gen: "1796162008793610.p1", Ver: 3, Grant: 28000, Next: 0, Avail: 444000, Live: 2, Now: 1796162008793610, Note: "created"},
		{Gen: "g", Ver: 1, Next: 10000, Live: 1, Waiting: 5, Lost: 3000, Dup: true, Now: 1, Note: "corrupt: level = \"abc\""},
		{Gen: "g", Note: "stale"},
		{Gen: "g", Grant: math.MinInt64, Avail: math.MinInt64},
	} {
		f.Add(encodeValues(answerValues(a)))
	}
	f.Add(encodeValues([]any{"g", int64(1), int64(2)}))
	f.Add(encodeValues([]any{nil, int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), ""}))
	f.Add(encodeValues([]any{"g", 1.5, int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(2), int64(0), []any{}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := parseAnswer(decodeValues(data))
		if err != nil {
			if a != (alloc.Answer{}) {
				t.Fatalf("an error with an answer: %+v", a)
			}
			return
		}
		if a.Gen == "" || strings.ContainsAny(a.Gen, " \t\r\n") {
			t.Fatalf("generation %q accepted", a.Gen)
		}
		if a.Ver < 0 || a.Live < 0 || a.Waiting < 0 || a.Next < 0 || a.Now < 0 {
			t.Fatalf("counts out of range accepted: %+v", a)
		}
		for _, x := range []int64{a.Grant, a.Avail, a.Lost} {
			if x > maxAmount || x < 0 {
				t.Fatalf("amount %d accepted: %+v", x, a)
			}
		}
		again, err := parseAnswer(answerValues(a))
		if err != nil || again != a {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, a)
		}
	})
}

func FuzzParsePeek(f *testing.F) {
	now := int64(1796162008793610)
	for _, v := range [][]any{
		{"token-bucket 500000 14000/5000/14000 1000 true", "g", int64(1), now, int64(math.MinInt64), int64(0), int64(1), int64(0), ""},
		{"token-bucket 500000 14000/5000/14000 1000 true", "1796162008793610.p1", int64(7), now, int64(444000), int64(0), int64(2), int64(1), ""},
		{"window 1000000 500000 0", "g", int64(9), now, int64(200), int64(100000), int64(2), int64(0), ""},
		{nil, nil, int64(0), now, int64(0), int64(0), int64(0), int64(0), ""},
		{nil, nil, int64(0), now, int64(0), int64(0), int64(0), int64(0), "the key holds a string"},
		{"window 0 0 0", "g", int64(0), now, int64(0), int64(0), int64(0), int64(0), ""},
		{"concurrency 5", "g", int64(0), now, int64(0), int64(0), int64(0), int64(0), ""},
	} {
		f.Add(encodeValues(v))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lv, err := parsePeek(decodeValues(data))
		for _, x := range []float64{lv.Capacity, lv.Pool, lv.Retries, lv.Allowed} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("a level with %v: %+v", x, lv)
			}
		}
		if lv.Processes < 0 || lv.Waiting < 0 || lv.Version < 0 || lv.Window < 0 {
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
			if lv.Capacity < 0 {
				t.Fatalf("inconsistent bucket: %+v", lv)
			}
		case lv.Kind == budget.KindWindow:
			if lv.Window > 10*time.Hour || lv.Allowed < 0 {
				t.Fatalf("window out of range: %+v", lv)
			}
		default:
			t.Fatalf("a budget of kind %q parsed: %+v", lv.Kind, lv)
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
