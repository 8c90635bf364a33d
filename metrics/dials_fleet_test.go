package metrics_test

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/metrics"
)

// A fleet.Watcher's change shows on a real /metrics endpoint as
// origin="fleet", at the time Redis stamped it, with nothing wired but
// RegisterDials and Watch (the watcher records the change itself); a change
// the process makes itself, before or after, shows as origin="local". The
// fleet's dials are in a real redis-server.
func TestDialsFleetOrigin(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	const name = "shop-dials"

	d := new(killswitch.Dials)
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterDials(reg, metrics.Labels{Target: "shop"}, d); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(web.Close)

	const (
		off     = `stormguard_dials_retries_off{target="shop"}`
		shed    = `stormguard_dials_shed_ratio{target="shop"}`
		changed = `stormguard_dials_last_change_timestamp_seconds{origin="%s",target="shop"}`
	)
	var w *fleet.Watcher
	// set writes the fleet's dials and waits until the watcher (started
	// the first time) applied them; it returns Redis's stamp.
	set := func(t *testing.T, c fleet.DialsChange, applied func() bool) time.Time {
		st, err := fleet.SetDials(t.Context(), rdb, name, c)
		if err != nil {
			t.Fatal(err)
		}
		if w == nil {
			w, err = fleet.Watch(rdb, name, d, fleet.WatchConfig{
				PollInterval: hostspeed.Scale(50 * time.Millisecond),
				Timeout:      hostspeed.Scale(time.Second),
				Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
		}
		for end := time.Now().Add(hostspeed.Scale(5 * time.Second)); !applied(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the watcher did not apply %+v", st)
			}
		}
		return st.Updated
	}
	truth, quarter, none := true, 0.25, 0.0
	var before time.Time
	steps := []struct {
		name string
		// do changes the dials and returns when they last changed, as the
		// series should say (the zero Time: never).
		do         func(t *testing.T) time.Time
		origin     string // the one series of the last change
		off, shed  string
		wantWithin bool // do's time is a lower bound (a local change, stamped by the process's clock)
	}{
		{"untouched", func(*testing.T) time.Time { return time.Time{} }, "none", "0", "0", false},
		{"a local change", func(t *testing.T) time.Time {
			before = time.Now()
			if err := d.SetShedFraction(0.5); err != nil {
				t.Fatal(err)
			}
			return before
		}, "local", "0", "0.5", true},
		{"the fleet's dials, read when the watcher starts", func(t *testing.T) time.Time {
			return set(t, fleet.DialsChange{RetriesOff: &truth, ShedFraction: &quarter}, func() bool {
				return d.RetriesDisabled() && d.ShedFraction() == quarter
			})
		}, "fleet", "1", "0.25", false},
		{"a fleet change while it watches", func(t *testing.T) time.Time {
			return set(t, fleet.DialsChange{ShedFraction: &none}, func() bool { return d.ShedFraction() == 0 })
		}, "fleet", "1", "0", false},
		{"a local change after", func(*testing.T) time.Time {
			before = time.Now()
			d.SetRetriesDisabled(false)
			return before
		}, "local", "0", "0", true},
	}
	for _, st := range steps {
		at := st.do(t)
		samples, _, _ := scrape(t, web.Client(), web.URL)
		if samples[off] != st.off || samples[shed] != st.shed {
			t.Errorf("%s: retries off %s, shed %s; want %s, %s", st.name, samples[off], samples[shed], st.off, st.shed)
		}
		for _, origin := range []string{"none", "local", "fleet"} {
			key := fmt.Sprintf(changed, origin)
			v, ok := samples[key]
			if origin != st.origin {
				if ok {
					t.Errorf("%s: %s = %s; want only origin=%q", st.name, key, v, st.origin)
				}
				continue
			}
			if !ok {
				t.Errorf("%s: %s missing", st.name, key)
				continue
			}
			got, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			want := 0.0
			if !at.IsZero() {
				want = float64(at.UnixNano()) / 1e9
			}
			switch {
			case st.wantWithin && (got < want || got > float64(time.Now().UnixNano())/1e9):
				t.Errorf("%s: %s = %s; want between %v and now", st.name, key, v, at)
			case !st.wantWithin && math.Abs(got-want) > 1e-6:
				t.Errorf("%s: %s = %s; want %v (%s)", st.name, key, v, want, at)
			}
		}
	}
}
