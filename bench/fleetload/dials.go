package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/killswitch"
)

// The kill switch at scale: N watchers (fleet.Watch, each with its own
// Redis client, as N processes have) spread over several OS processes. The
// program measures what watching costs Redis while nothing changes, then
// how long a change takes to reach every watcher, announced (SetDials) and
// unannounced (the hash written directly, as a restored backup is: only the
// polling finds it).

type dialsWorkerConfig struct {
	Addr  string        `json:"addr"`
	Name  string        `json:"name"`
	Count int           `json:"count"`
	Poll  time.Duration `json:"poll"`
}

// dialsWorker runs the watchers and prints "ready", then one line per
// change a watcher applies: "VERSION UNIXNANO".
func dialsWorker(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewScanner(stdin)
	if !in.Scan() {
		return errors.New("dials worker: no configuration")
	}
	var cfg dialsWorkerConfig
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var mu sync.Mutex
	out := bufio.NewWriter(stdout)
	var ws []*fleet.Watcher
	var clients []*redis.Client
	for range cfg.Count {
		opts := fleet.ClientOptions(cfg.Addr, "", 200*time.Millisecond)
		opts.PoolSize = 1
		rdb := redis.NewClient(opts)
		clients = append(clients, rdb)
		w, err := fleet.Watch(rdb, cfg.Name, new(killswitch.Dials), fleet.WatchConfig{
			PollInterval: cfg.Poll, Timeout: 200 * time.Millisecond, Logger: quiet,
			OnChange: func(s fleet.DialsState) {
				at := time.Now().UnixNano()
				mu.Lock()
				fmt.Fprintf(out, "%d %d\n", s.Version, at)
				mu.Unlock()
			},
		})
		if err != nil {
			return err
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		for !w.Stats().Connected {
			time.Sleep(time.Millisecond)
		}
	}
	mu.Lock()
	fmt.Fprintln(out, "ready")
	out.Flush()
	mu.Unlock()
	// Flush the changes every few milliseconds until stdin closes.
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(done)
	}()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			for i, w := range ws {
				w.Close()
				clients[i].Close()
			}
			mu.Lock()
			out.Flush()
			mu.Unlock()
			return nil
		case <-t.C:
			mu.Lock()
			out.Flush()
			mu.Unlock()
		}
	}
}

// runDials is the parent of the kill-switch measurement.
func runDials(o options, addr string, admin *redis.Client, stdout io.Writer) error {
	ctx := context.Background()
	name := fmt.Sprintf("fleetload-%d", time.Now().UnixNano())
	type dialsWorker struct {
		*worker
		lines chan string
		count int
	}
	var ws []*dialsWorker
	for i := range o.workers {
		count := share(o.n, o.workers, i)
		wk, err := spawn("dials")
		if err != nil {
			return err
		}
		defer wk.cmd.Process.Kill()
		w := &dialsWorker{worker: wk, lines: make(chan string, 1<<16), count: count}
		go func() {
			for w.out.Scan() {
				w.lines <- w.out.Text()
			}
			close(w.lines)
		}()
		b, _ := json.Marshal(dialsWorkerConfig{Addr: addr, Name: name, Count: count, Poll: o.poll})
		fmt.Fprintf(w.in, "%s\n", b)
		ws = append(ws, w)
	}
	for i, w := range ws {
		if l := <-w.lines; l != "ready" {
			return fmt.Errorf("dials worker %d: %q", i, l)
		}
	}
	// What watching costs Redis when nothing changes.
	idle := 10 * time.Duration(o.scale*float64(time.Second))
	a, err := readStats(ctx, admin)
	if err != nil {
		return err
	}
	time.Sleep(idle)
	b, err := readStats(ctx, admin)
	if err != nil {
		return err
	}
	d := diff(a, b)
	fmt.Fprintf(stdout, "%d watchers over %d OS processes, poll every %v, %s\n", o.n, o.workers, o.poll, time.Now().UTC().Format(time.DateOnly))
	fmt.Fprintf(stdout, "idle: %.0f commands/s (HMGET %.0f/s), Redis CPU %.3f core, %d clients connected\n",
		float64(d.commands)/d.seconds, float64(b.calls["hmget"]-a.calls["hmget"])/d.seconds, d.cpu/d.seconds, clientCount(ctx, admin))

	// Changes: each waits for every watcher's line.
	collect := func(version int64, t0 time.Time) ([]time.Duration, error) {
		var lat []time.Duration
		deadline := time.After(10 * time.Second)
		for _, w := range ws {
			for got := 0; got < w.count; {
				select {
				case l, ok := <-w.lines:
					if !ok {
						return nil, errors.New("a dials worker ended")
					}
					var v, ns int64
					if _, err := fmt.Sscan(l, &v, &ns); err != nil {
						return nil, fmt.Errorf("dials worker said %q", l)
					}
					if v == version {
						lat = append(lat, time.Unix(0, ns).Sub(t0))
						got++
					}
				case <-deadline:
					return lat, fmt.Errorf("version %d reached %d of %d watchers within 10s", version, len(lat), o.n)
				}
			}
		}
		slices.Sort(lat)
		return lat, nil
	}
	report := func(what string, lat []time.Duration, d delta) {
		fmt.Fprintf(stdout, "%s: every watcher within %v (median %v, p99 %v); Redis over those %.0fms: %d commands, CPU %.1fms\n",
			what, lat[len(lat)-1].Round(time.Microsecond), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond),
			d.seconds*1000, d.commands, d.cpu*1000)
	}
	// change applies one change and reports how long it took to reach
	// every watcher, with what Redis did meanwhile.
	change := func(what string, version int64, apply func() error) error {
		s0, err := readStats(ctx, admin)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := apply(); err != nil {
			return err
		}
		lat, err := collect(version, t0)
		if err != nil {
			return err
		}
		s1, err := readStats(ctx, admin)
		if err != nil {
			return err
		}
		report(what, lat, diff(s0, s1))
		return nil
	}
	off := true
	var version int64
	for i := range 5 {
		err := change(fmt.Sprintf("SetDials #%d (pub/sub)", i+1), version+1, func() error {
			st, err := fleet.SetDials(ctx, admin, name, fleet.DialsChange{RetriesOff: &off})
			version = st.Version
			return err
		})
		if err != nil {
			return err
		}
		off = !off
		time.Sleep(500 * time.Millisecond)
	}
	for i := range 3 {
		version++
		err := change(fmt.Sprintf("unannounced change #%d (polling)", i+1), version, func() error {
			return admin.HSet(ctx, "stormguard:dials:{"+name+"}", "version", version, "retries_off", map[bool]int{true: 1, false: 0}[off]).Err()
		})
		if err != nil {
			return err
		}
		off = !off
	}
	for _, w := range ws {
		w.in.Close()
		_ = w.cmd.Wait()
	}
	return nil
}

func clientCount(ctx context.Context, rdb *redis.Client) int64 {
	n, _ := rdb.Do(ctx, "CLIENT", "LIST").Text()
	var c int64
	for _, ch := range n {
		if ch == '\n' {
			c++
		}
	}
	return c
}
