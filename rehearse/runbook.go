package rehearse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/killswitch"
)

// The runbook's steps turn the real kill switch: a service's admin
// endpoint (killswitch.NewAdmin: a POST of the dials with the bearer
// token), the fleet's dials on Redis (fleet.SetDials, which every process
// of the fleet follows), or, for a client without fleet dials, the
// client's own dials in this process. The dials a run turns are read
// before it and set back after it, so a rehearsal leaves the service as
// it found it.

// StepResult is what one step did.
type StepResult struct {
	// At is when it was due, seconds from the run's start; DoneS when it
	// took effect (the admin endpoint or Redis answered), TookS how long
	// the call took.
	At    float64 `json:"t"`
	DoneS float64 `json:"done_s"`
	TookS float64 `json:"took_s"`
	Label string  `json:"label"`
	Via   string  `json:"via"`
	// Err is why it failed ("" when it worked).
	Err string `json:"error,omitempty"`
}

// switchboard turns the kill switches of a run and restores them.
type switchboard struct {
	plan    *Plan
	client  *http.Client
	rdb     *redis.Client
	clients map[string]*killswitch.Dials
	// saved are the dials as they were before the run, to restore.
	admins map[string]killswitch.State
	fleets map[string]fleet.DialsState
}

func newSwitchboard(p *Plan, g *Guard, gens []*generator) *switchboard {
	sb := &switchboard{plan: p, client: &http.Client{Transport: g.transport(), Timeout: 5 * time.Second},
		clients: map[string]*killswitch.Dials{}, admins: map[string]killswitch.State{}, fleets: map[string]fleet.DialsState{}}
	for _, gen := range gens {
		sb.clients[gen.cp.Name] = gen.dials
	}
	if p.Redis != "" {
		dial := g.Dialer()
		sb.rdb = redis.NewClient(&redis.Options{Addr: p.Redis, Password: os.Getenv("STORMGUARD_REDIS_PASSWORD"),
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dial.DialContext(ctx, network, addr)
			},
			DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: 1})
	}
	return sb
}

// close releases the Redis client.
func (sb *switchboard) close() {
	if sb.rdb != nil {
		sb.rdb.Close()
	}
}

// save reads the dials the steps will turn, before the run. A dial it
// cannot read fails the run before the storm's load is sent (the preflight's
// probes come before it): a rehearsal whose
// off switch does not answer should not start.
func (sb *switchboard) save(ctx context.Context) error {
	var errs []error
	for _, s := range sb.plan.Steps {
		if s.Client {
			continue
		}
		e := sb.plan.Endpoints[s.Endpoint]
		switch {
		case e.Admin != nil:
			if _, ok := sb.admins[e.Admin.URL]; ok {
				continue
			}
			st, err := sb.admin(ctx, e.Admin, http.MethodGet, nil)
			if err != nil {
				errs = append(errs, fmt.Errorf("services.%s: reading its dials before the run: %w", e.Name, err))
				continue
			}
			sb.admins[e.Admin.URL] = st
		case e.FleetDials != "":
			if err := sb.saveFleet(ctx, e.FleetDials); err != nil {
				errs = append(errs, fmt.Errorf("services.%s: %w", e.Name, err))
			}
		}
	}
	for _, c := range sb.plan.Clients {
		if c.FleetDials != "" {
			if err := sb.saveFleet(ctx, c.FleetDials); err != nil {
				errs = append(errs, fmt.Errorf("clients.%s: %w", c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (sb *switchboard) saveFleet(ctx context.Context, name string) error {
	if _, ok := sb.fleets[name]; ok {
		return nil
	}
	st, err := fleet.GetDials(ctx, sb.rdb, name)
	if err != nil {
		return fmt.Errorf("reading the fleet's dials %q before the run: %w", name, err)
	}
	sb.fleets[name] = st
	return nil
}

// restore sets every dial the run may have turned back to what it was.
func (sb *switchboard) restore(ctx context.Context) error {
	var errs []error
	for _, e := range sb.plan.Endpoints {
		if e.Admin == nil {
			continue
		}
		st, ok := sb.admins[e.Admin.URL]
		if !ok {
			continue
		}
		body, _ := json.Marshal(st)
		if _, err := sb.admin(ctx, e.Admin, http.MethodPost, body); err != nil {
			errs = append(errs, fmt.Errorf("services.%s: setting its dials back: %w", e.Name, err))
		}
	}
	for name, st := range sb.fleets {
		// Dials never set (version 0) read as the defaults, which every
		// process had: they are set to those.
		off, shed, lim := st.RetriesOff, st.ShedFraction, st.LimitOverride
		if _, err := fleet.SetDials(ctx, sb.rdb, name, fleet.DialsChange{RetriesOff: &off, ShedFraction: &shed, LimitOverride: &lim}); err != nil {
			errs = append(errs, fmt.Errorf("setting the fleet's dials %q back: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// run carries out the steps at their times from start, until ctx ends,
// and returns what each did.
func (sb *switchboard) run(ctx context.Context, start time.Time) []StepResult {
	out := make([]StepResult, 0, len(sb.plan.Steps))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for _, s := range sb.plan.Steps {
		if d := time.Until(start.Add(s.At)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return out
			case <-timer.C:
			}
		}
		began := time.Now()
		err := sb.do(ctx, s)
		r := StepResult{At: s.At.Seconds(), DoneS: time.Since(start).Seconds(), TookS: time.Since(began).Seconds(), Label: s.Label, Via: s.Via}
		if err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	return out
}

// do carries out one step.
func (sb *switchboard) do(ctx context.Context, s Step) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var ch fleet.DialsChange
	off := s.Kind == "retries-off"
	shed := s.Value
	lim := int(s.Value)
	switch s.Kind {
	case "retries-off", "retries-on":
		ch.RetriesOff = &off
	case "shed":
		ch.ShedFraction = &shed
	case "limit":
		ch.LimitOverride = &lim
	}
	if s.Client {
		for _, c := range sb.plan.Clients {
			if c.Name != s.Target {
				continue
			}
			if c.FleetDials != "" {
				_, err := fleet.SetDials(ctx, sb.rdb, c.FleetDials, ch)
				return err
			}
			sb.clients[c.Name].SetRetriesDisabled(off)
			return nil
		}
		return fmt.Errorf("no client %q", s.Target)
	}
	e := sb.plan.Endpoints[s.Endpoint]
	if e.Admin != nil {
		body, _ := json.Marshal(map[string]any{map[string]string{"retries-off": "retries_off", "retries-on": "retries_off",
			"shed": "shed_fraction", "limit": "limit_override"}[s.Kind]: map[string]any{"retries-off": off, "retries-on": off,
			"shed": shed, "limit": lim}[s.Kind]})
		_, err := sb.admin(ctx, e.Admin, http.MethodPost, body)
		return err
	}
	_, err := fleet.SetDials(ctx, sb.rdb, e.FleetDials, ch)
	return err
}

// admin sends one request to an admin endpoint and returns the dials it
// answered with.
func (sb *switchboard) admin(ctx context.Context, a *Admin, method string, body []byte) (killswitch.State, error) {
	var st killswitch.State
	req, err := http.NewRequestWithContext(ctx, method, a.URL, bytes.NewReader(body))
	if err != nil {
		return st, err
	}
	tok, err := a.Token()
	if err != nil {
		return st, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := sb.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s %s: %s: %s", method, a.URL, resp.Status, bytes.TrimSpace(data))
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s %s: the answer is not the dials: %v", method, a.URL, err)
	}
	return st, nil
}
