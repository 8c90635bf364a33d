package report

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stormguard/stormguard/sim/result"
)

// twoClients builds a run of 10 one-second bins with a trigger over
// [3, 5): users at the rate users, all served; readers at the rate
// readers, served until collapseAt and failed from then to the end (never
// when collapseAt < 0); a service db whose queue climbs to queuePeak.
// It is the Slack incident's shape: 2,000/s of users beside 10/s of
// configuration readers that fail from the trigger on.
func twoClients(name string, users, readers, collapseAt, queuePeak float64) result.Result {
	const bins = 10
	r := result.Result{Name: name, Judgement: result.Judgement{Verdict: result.Recovered, Why: "made up for the test"},
		Seed: 1, BinS: 1, DurationS: bins, TriggerS: [][2]float64{{3, 5}}}
	u := result.ClientSeries{Name: "users"}
	c := result.ClientSeries{Name: "readers"}
	v := result.ServiceSeries{Name: "db"}
	for i := range bins {
		t := float64(i)
		good := readers
		if collapseAt >= 0 && t >= collapseAt {
			good = 0
		}
		u.Bins = append(u.Bins, result.ClientBin{T: t, Demand: users, Goodput: users, Budget: -1})
		c.Bins = append(c.Bins, result.ClientBin{T: t, Demand: readers, Goodput: good, Budget: -1})
		v.Bins = append(v.Bins, result.ServiceBin{T: t, OfferedFirst: users + readers, Throughput: users + good,
			Goodput: users + good, Queue: queuePeak * t / (bins - 1)})
	}
	r.Clients = []result.ClientSeries{u, c}
	r.Services = []result.ServiceSeries{v}
	return r
}

// panelTops lays out runs as the report does and returns each run's
// panels' keys and y maxima, in order.
func panelTops(t *testing.T, runs []result.Result) (keys [][]string, tops []map[string]float64) {
	t.Helper()
	lay := layoutOf(t, runs...)
	for _, r := range runs {
		plots, _, ks, err := panels(r, lay)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for i, p := range plots {
			if p.Y.Min != 0 {
				t.Errorf("%s: panel %q starts at y = %v, want 0", r.Name, ks[i], p.Y.Min)
			}
			m[ks[i]] = p.Y.Max
		}
		keys, tops = append(keys, ks), append(tops, m)
	}
	return keys, tops
}

// A client whose peak demand is under a tenth of the largest client's is
// drawn in a panel of its own, on a scale of its own: its collapse (10/s
// to 0 beside 2,000/s of users) spans most of its panel's height instead
// of half a percent of the users' panel. A client at a tenth or more
// shares the clients' panel.
func TestSmallClientOwnPanel(t *testing.T) {
	tests := []struct {
		name           string
		users, readers float64
		wantOwn        []string // the clients with a panel of their own
	}{
		{"slack: 2,000/s of users, 10/s of readers", 2000, 10, []string{"readers"}},
		{"200/s of users, 2/s of readers", 200, 2, []string{"readers"}},
		{"just under a tenth", 2000, 199, []string{"readers"}},
		{"a tenth exactly", 2000, 200, nil},
		{"comparable clients", 2000, 1500, nil},
		{"the small one first in the list", 10, 2000, []string{"users"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := twoClients("run", tt.users, tt.readers, 3, 100)
			keys, tops := panelTops(t, []result.Result{r})
			want := []string{"clients"}
			for _, c := range tt.wantOwn {
				want = append(want, "client "+c)
			}
			want = append(want, "service db", "queue")
			if !slices.Equal(keys[0], want) {
				t.Fatalf("panels %q, want %q", keys[0], want)
			}
			_, svg, err := chart(r, layoutOf(t, r))
			if err != nil {
				t.Fatal(err)
			}
			peak := map[string]float64{"users": tt.users, "readers": tt.readers}
			for _, c := range []string{"users", "readers"} {
				own := slices.Contains(tt.wantOwn, c)
				top := tops[0]["clients"]
				if own {
					top = tops[0]["client "+c]
				}
				// The panel covers the client's values, and its drop
				// from peak to 0 spans at least half the panel's height.
				if top < peak[c] {
					t.Errorf("%s: its panel's y axis ends at %v, below its peak %v", c, top, peak[c])
				}
				if frac := peak[c] / top; own && frac < 0.5 {
					t.Errorf("%s (peak %v): its collapse spans %.1f%% of its panel (y to %v), want at least half",
						c, peak[c], 100*frac, top)
				}
				// The chart says which panel is on its own scale, and
				// names the client in the clients' panel otherwise (its
				// lines' legend, or the panel's y label when it is the
				// panel's only client).
				label := c + ": requests/s (own scale)"
				if got := bytes.Contains(svg, []byte(label)); got != own {
					t.Errorf("the chart has %q: %v, want %v", label, got, own)
				}
				shared := bytes.Contains(svg, []byte(c+": demand")) || bytes.Contains(svg, []byte(c+": requests/s</text>"))
				if shared == own {
					t.Errorf("the chart names %s in the clients' panel: %v, want %v", c, shared, !own)
				}
			}
		})
	}
}

// layoutOf is the report's layout of runs (newLayout), failing t on an
// error.
func layoutOf(t *testing.T, runs ...result.Result) layout {
	t.Helper()
	l, err := newLayout(runs)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The runs of one scenario share each panel's y scale: a defended run's
// queue of 16 is drawn on the naive run's 25,000 scale, a small client's
// panel is the same in every run, and a client small in one run but not
// in another gets the same panels in both (its peak over every run
// decides).
func TestChartsShareScale(t *testing.T) {
	tests := []struct {
		name     string
		runs     []result.Result
		wantKeys []string
	}{
		{"queues of 25,000 and 16", []result.Result{
			twoClients("naive", 2000, 10, 3, 25000),
			twoClients("stormguard", 2000, 10, -1, 16),
		}, []string{"clients", "client readers", "service db", "queue"}},
		{"users at 100/s and 2,000/s", []result.Result{
			twoClients("small", 100, 10, 3, 50),
			twoClients("large", 2000, 10, 3, 50),
		}, []string{"clients", "client readers", "service db", "queue"}},
		{"readers small in one run only", []result.Result{
			twoClients("few", 2000, 10, 3, 50),
			twoClients("many", 2000, 500, 3, 50),
		}, []string{"clients", "service db", "queue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, tops := panelTops(t, tt.runs)
			for i, r := range tt.runs {
				if !slices.Equal(keys[i], tt.wantKeys) {
					t.Errorf("%s: panels %q, want %q", r.Name, keys[i], tt.wantKeys)
				}
			}
			// Each panel's top: the largest of the runs' values (and
			// the same in every run).
			most := map[string]float64{}
			for _, r := range tt.runs {
				for _, c := range r.Clients {
					key := "clients"
					if slices.Contains(tt.wantKeys, "client "+c.Name) {
						key = "client " + c.Name
					}
					for _, b := range c.Bins {
						most[key] = max(most[key], b.Demand)
					}
				}
				for _, b := range r.Services[0].Bins {
					most["service db"] = max(most["service db"], b.OfferedFirst)
					most["queue"] = max(most["queue"], b.Queue)
				}
			}
			for _, k := range tt.wantKeys {
				for i, r := range tt.runs {
					if got := tops[i][k]; got < most[k] || got > 1.1*most[k] {
						t.Errorf("%s: panel %q ends at y = %v, want the runs' largest value %v (+5%%)", r.Name, k, got, most[k])
					}
					if got, first := tops[i][k], tops[0][k]; got != first {
						t.Errorf("panel %q ends at y = %v in %s and %v in %s", k, got, r.Name, first, tt.runs[0].Name)
					}
				}
			}
		})
	}
}

// The report's charts, as written, show the sharing: the runs of a
// scenario have the same axis labels (ticks) in every panel, and the
// small client's panel says it is on its own scale.
func TestWriteSimSharesScale(t *testing.T) {
	runs := []result.Result{
		twoClients("naive", 2000, 10, 3, 25000),
		twoClients("stormguard", 2000, 10, -1, 16),
	}
	dir := t.TempDir()
	if err := WriteSim(dir, result.Output{Scenario: "slack-like", Runs: runs}); err != nil {
		t.Fatal(err)
	}
	number := regexp.MustCompile(`>(-?[0-9.]+)</text>`)
	ticks := map[string][]string{}
	for _, name := range FileNames(runs) {
		svg := readFile(t, filepath.Join(dir, name+".svg"))
		for _, m := range number.FindAllSubmatch(svg, -1) {
			ticks[name] = append(ticks[name], string(m[1]))
		}
		if !bytes.Contains(svg, []byte("readers: requests/s (own scale)")) {
			t.Errorf("%s.svg has no panel of the readers' own", name)
		}
	}
	if !slices.Contains(ticks["stormguard"], "25000") {
		t.Errorf("stormguard's chart has no tick at 25000 (its queue is not on the naive run's scale): %q", ticks["stormguard"])
	}
	if !slices.Equal(ticks["naive"], ticks["stormguard"]) {
		t.Errorf("the runs' axis labels differ:\nnaive      %q\nstormguard %q", ticks["naive"], ticks["stormguard"])
	}
}
