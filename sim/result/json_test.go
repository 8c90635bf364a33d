package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomOutput builds an Output of random runs: names with quotes, the
// marker's own text, HTML characters and non-ASCII; series with random
// rates, with no bins (nil and empty) and with many.
func randomOutput(r *rand.Rand) Output {
	names := []string{"app", `a"bins":null`, `x","bins":null,"`, "<db>&", "é\u2028", ""}
	f := func() float64 {
		if r.IntN(4) == 0 {
			return 0
		}
		return r.NormFloat64() * 1e3
	}
	out := Output{Scenario: names[r.IntN(len(names))], Description: names[r.IntN(len(names))]}
	for range r.IntN(4) {
		res := Result{Name: names[r.IntN(len(names))], Seed: r.Uint64(), BinS: 1, DurationS: 10,
			TriggerS: [][2]float64{}, Events: r.Uint64() >> 20}
		res.Verdict, res.Why = Stable, names[r.IntN(len(names))]
		if r.IntN(2) == 0 {
			res.RecoveryS = ptr(f())
		}
		for range r.IntN(3) {
			c := ClientSeries{Name: names[r.IntN(len(names))], Total: ClientTotal{Requests: r.Int64N(1000)}}
			c.Verdict, c.Why = Metastable, names[r.IntN(len(names))]
			switch n := r.IntN(4); n {
			case 0: // nil
			case 1:
				c.Bins = []ClientBin{}
			default:
				for b := range r.IntN(20) {
					c.Bins = append(c.Bins, ClientBin{T: float64(b), Demand: f(), Goodput: f(), GaveUp: GiveUps{Attempts: f(), Budget: f()},
						ArrivedOK: f(), LatencyP50: f() / 1e6, LatencyP99: f() / 1e3, Budget: -1})
				}
			}
			res.Clients = append(res.Clients, c)
		}
		for range r.IntN(3) {
			v := ServiceSeries{Name: names[r.IntN(len(names))], Total: ServiceTotal{Arrived: r.Int64N(1000), OverheadS: f()}}
			if r.IntN(3) > 0 {
				for b := range r.IntN(20) {
					v.Bins = append(v.Bins, ServiceBin{T: float64(b) / 3, OfferedFirst: f(), Throughput: f(), Queue: f(), OverheadS: f()})
				}
			}
			res.Services = append(res.Services, v)
		}
		out.Runs = append(out.Runs, res)
	}
	return out
}

// streamed returns out with the bins of some series moved to a Stream.
func streamed(r *rand.Rand, out Output) Output {
	runs := slices.Clone(out.Runs)
	for i := range runs {
		runs[i].Clients = slices.Clone(runs[i].Clients)
		for j := range runs[i].Clients {
			if c := &runs[i].Clients[j]; c.Bins != nil && r.IntN(2) == 0 {
				c.Stream, c.Bins = slices.Values(c.Bins), nil
			}
		}
		runs[i].Services = slices.Clone(runs[i].Services)
		for j := range runs[i].Services {
			if v := &runs[i].Services[j]; v.Bins != nil && r.IntN(2) == 0 {
				v.Stream, v.Bins = slices.Values(v.Bins), nil
			}
		}
	}
	out.Runs = runs
	return out
}

// TestWriteJSON holds WriteJSON to encoding/json: for random Outputs, with
// some series streamed, the bytes of json.Encoder.Encode and, indented,
// of json.MarshalIndent with a newline.
func TestWriteJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		out := randomOutput(r)
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(out); err != nil {
			t.Fatal(err)
		}
		wantIndent, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		wantIndent = append(wantIndent, '\n')
		s := streamed(r, out)
		for _, tt := range []struct {
			indent bool
			want   []byte
		}{{false, want.Bytes()}, {true, wantIndent}} {
			var got bytes.Buffer
			if err := WriteJSON(&got, s, tt.indent); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), tt.want) {
				t.Fatalf("case %d, indent %v:\ngot  %s\nwant %s", i, tt.indent, firstDiff(got.Bytes(), tt.want), firstDiff(tt.want, got.Bytes()))
			}
		}
	}
}

func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("…%q… (byte %d)", a[max(0, i-80):min(len(a), i+80)], i)
}
