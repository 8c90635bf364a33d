package lab

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stormguard/stormguard/sim/result"
)

// The difference panel's ticks always include 0 when the range holds it,
// at the default ticks' step; other ranges keep the default ticks.
func TestZeroTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []float64 // the labelled ticks
	}{
		{-120, 190, []float64{-120, 0, 120}}, // gonum's default: -80, 40, 160
		{-37.5, 60, []float64{-30, 0, 30, 60}},
		{-0.7, 1.2, []float64{-0.5, 0, 0.5, 1}},
		{5, 25, []float64{5, 15, 25}}, // no zero in range: the default ticks
	}
	for _, tt := range tests {
		var got []float64
		for _, tk := range (zeroTicks{}).Ticks(tt.lo, tt.hi) {
			if tk.Label != "" {
				got = append(got, tk.Value)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("[%v, %v]: ticks %v, want %v", tt.lo, tt.hi, got, tt.want)
		}
	}
	for _, tk := range (zeroTicks{}).Ticks(-120, 190) {
		if tk.Value == 0 && tk.Label != "0" {
			t.Errorf("the zero tick is labelled %q", tk.Label)
		}
	}
}

// labRun is a lab run of 10 one-second bins, a trigger over [3, 5): its
// client's demand, served until 3 s and at goodAfter from then on; a
// backend db whose queue climbs to queuePeak; and the comparison with the
// simulator, whose difference is diff in every window.
func labRun(name string, demand, goodAfter, queuePeak, diff float64) (result.Result, Comparison) {
	const bins = 10
	r := result.Result{Name: name, Judgement: result.Judgement{Verdict: result.Recovered, Why: "made up for the test"},
		BinS: 1, DurationS: bins, TriggerS: [][2]float64{{3, 5}}}
	c := result.ClientSeries{Name: "users"}
	v := result.ServiceSeries{Name: "db"}
	cmp := Comparison{Run: name, WindowS: 2}
	for i := range bins {
		t := float64(i)
		good := demand
		if t >= 3 {
			good = goodAfter
		}
		c.Bins = append(c.Bins, result.ClientBin{T: t, Demand: demand, Goodput: good, Budget: -1})
		v.Bins = append(v.Bins, result.ServiceBin{T: t, OfferedFirst: demand, OfferedRetries: 2 * (demand - good),
			Throughput: demand, Goodput: good, Wasted: demand - good, Queue: queuePeak * t / (bins - 1)})
		if i%2 == 0 {
			cmp.T, cmp.Diff = append(cmp.T, t), append(cmp.Diff, diff)
		}
	}
	r.Clients = []result.ClientSeries{c}
	r.Services = []result.ServiceSeries{v}
	return r, cmp
}

// The figure's runs share each row's y range: a defended run's queue of
// 16 is drawn on the naive run's 25,000 scale, a run's demand on the
// largest run's, a difference that stays positive on the scale of one
// that goes negative; each row's range covers every run's values.
func TestFigureSharesRows(t *testing.T) {
	type run struct{ demand, goodAfter, queuePeak, diff float64 }
	tests := []struct {
		name string
		runs []run
	}{
		{"queues of 25,000 and 16", []run{{1000, 0, 25000, -300}, {1000, 1000, 16, 5}}},
		{"demand of 100/s and 1,000/s", []run{{100, 100, 10, 2}, {1000, 400, 10, -50}}},
		{"three runs, the largest last", []run{{50, 0, 5, 1}, {200, 200, 40, -1}, {900, 0, 3000, 80}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out Output
			for i, r := range tt.runs {
				res, cmp := labRun(fmt.Sprintf("run%d", i), r.demand, r.goodAfter, r.queuePeak, r.diff)
				out.Runs, out.Comparisons = append(out.Runs, res), append(out.Comparisons, cmp)
			}
			grid, err := figurePlots(out)
			if err != nil {
				t.Fatal(err)
			}
			// Each row's values over every run: demand and goodput;
			// the difference; the backend's offered load (first tries,
			// retries), throughput and waste; its queue.
			hi, lo := make([]float64, 4), make([]float64, 4)
			for _, r := range tt.runs {
				hi[0] = max(hi[0], r.demand)
				hi[1], lo[1] = max(hi[1], r.diff), min(lo[1], r.diff)
				hi[2] = max(hi[2], r.demand, 2*(r.demand-r.goodAfter))
				hi[3] = max(hi[3], r.queuePeak)
			}
			if len(grid) != 4 {
				t.Fatalf("%d rows, want 4", len(grid))
			}
			for i, row := range grid {
				if len(row) != len(tt.runs) {
					t.Fatalf("row %d has %d panels, want %d", i, len(row), len(tt.runs))
				}
				for j, p := range row {
					if p.Y.Min != row[0].Y.Min || p.Y.Max != row[0].Y.Max {
						t.Errorf("row %d: run%d's y range [%v, %v], run0's [%v, %v]", i, j, p.Y.Min, p.Y.Max, row[0].Y.Min, row[0].Y.Max)
					}
					if p.Y.Max < hi[i] || p.Y.Min > lo[i] {
						t.Errorf("row %d: run%d's y range [%v, %v] does not cover the runs' values [%v, %v]", i, j, p.Y.Min, p.Y.Max, lo[i], hi[i])
					}
				}
			}
		})
	}
}
