package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet/alloc"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
)

// The differential test: the Lua script (stepScript) and the Go core
// (alloc.Step) are one allocation rule written twice. Random message
// sequences go to both, with the same times; every answer must be equal,
// and so must the states they leave (compared every few steps and at the
// end).

// diffParams are the rules the test runs with: small enough that waits
// lapse, processes are forgotten and the bound on remembered processes
// bites within a few thousand steps.
func diffParams(kind alloc.Kind) alloc.Params {
	p := alloc.Params{Rate: 3, MinNextUS: 10_000, MaxNextUS: 2_000_000, HoldUS: 300_000, LiveUS: 3_000_000, MaxProcs: 9}
	switch kind {
	case alloc.Bucket:
		p.Kind, p.Spec, p.Capacity = alloc.Bucket, "token-bucket 100000 10000/10000/10000 1000 true", 100_000
	case alloc.Window:
		p.Kind, p.Spec = alloc.Window, "window 100000 100000 3000000"
		p.SlotUS, p.RatioMicro, p.FloorMicro = 100_000, 100_000, 3_000_000
	}
	return p
}

// diffRun drives both sides with one random sequence.
type diffRun struct {
	t     *testing.T
	rdb   *redis.Client
	srv   string // Redis's run_id
	keys  []string
	rng   *rand.Rand
	p     alloc.Params
	other alloc.Params // another spec
	s     alloc.State
	ids   []string
	seq   map[string]int64
	last  map[string]alloc.Message // each process's last message, for repeats
	seen  map[string]alloc.Answer  // each process's last answer
	now   int64
	steps int
	// Counts of what the sequence exercised, so that a test that stopped
	// exercising a branch fails instead of passing silently.
	notes                         map[string]int
	grants, unmet, dups, specErrs int
}

func newDiffRun(t *testing.T, rdb *redis.Client, srv string, kind alloc.Kind, seed uint64) *diffRun {
	p := diffParams(kind)
	other := p
	other.Spec += " other"
	r := &diffRun{t: t, rdb: rdb, srv: srv, keys: budgetKeys(fmt.Sprintf("diff-%d-%d", kind, seed)),
		rng: rand.New(rand.NewPCG(seed, uint64(kind))), p: p, other: other,
		seq: map[string]int64{}, last: map[string]alloc.Message{}, seen: map[string]alloc.Answer{},
		now: 1_700_000_000_000_000 + int64(seed)*1_000_000_000, notes: map[string]int{}}
	for i := range 14 {
		r.ids = append(r.ids, "p"+strconv.Itoa(i))
	}
	return r
}

// message draws the next message.
func (r *diffRun) message() (alloc.Message, alloc.Params) {
	id := r.ids[r.rng.IntN(len(r.ids))]
	if prev, ok := r.last[id]; ok && r.rng.IntN(12) == 0 {
		return prev, r.p // a repeat: the answer was lost
	}
	r.seq[id]++
	m := alloc.Message{ID: id, Seq: r.seq[id]}
	if a, ok := r.seen[id]; ok {
		m.Known, m.Seen = a.Gen, a.Ver
		switch r.rng.IntN(40) {
		case 0:
			m.Seen += 1 + r.rng.Int64N(5) // saw a later version: a state that went back in time
		case 1:
			m.Known = "1.elsewhere"
		}
	}
	unit := int64(10_000)
	if r.p.Kind == alloc.Window {
		unit = alloc.Unit
	}
	switch r.rng.IntN(4) {
	case 0:
		m.Credit = r.rng.Int64N(3 * unit)
		if r.p.Kind == alloc.Window {
			m.Credit = r.rng.Int64N(40) // requests
		}
	case 1:
		m.Credit = r.rng.Int64N(200_000)
	}
	if r.p.Kind == alloc.Bucket {
		m.Span = r.rng.Int64N(5000) // ms
		m.Room = r.rng.Int64N(150_000)
		m.Age = r.rng.Int64N(6000)
		if r.rng.IntN(20) == 0 {
			m.Span = 1 << 30 // beyond the cap
		}
		if r.rng.IntN(3) == 0 {
			m.Back = r.rng.Int64N(3 * unit)
		}
	}
	if r.rng.IntN(3) > 0 {
		m.Need = unit * (1 + r.rng.Int64N(2))
		m.Want = m.Need + unit*r.rng.Int64N(4)
		if r.rng.IntN(10) == 0 {
			m.Want = 0 // a want below the need counts as the need
		}
	}
	m.Leave = r.rng.IntN(30) == 0
	r.last[id] = m
	if r.rng.IntN(150) == 0 {
		return m, r.other
	}
	return m, r.p
}

// advance moves the time on, now and then by a lot (waits lapse, processes
// are forgotten, slots leave the window) or back (Redis's clock jumped).
func (r *diffRun) advance() {
	switch x := r.rng.IntN(100); {
	case x < 60:
		r.now += r.rng.Int64N(20_000)
	case x < 90:
		r.now += r.rng.Int64N(400_000)
	case x < 97:
		r.now += r.rng.Int64N(5_000_000)
	default:
		r.now -= r.rng.Int64N(1_000_000)
	}
}

// step sends one message to both sides and compares the answers.
func (r *diffRun) step() {
	r.t.Helper()
	r.advance()
	if r.rng.IntN(200) == 0 {
		// The state was last written by another server: a failover.
		r.rdb.HSet(context.Background(), r.keys[0], "srv", "0123456789abcdef")
		if r.s.Exists() {
			r.s.Srv = "0123456789abcdef"
		}
	}
	if r.rng.IntN(400) == 0 {
		// Redis lost the state: a restart without persistence, a flush.
		r.rdb.Del(context.Background(), r.keys...)
		r.s = alloc.State{}
	}
	m, p := r.message()
	got, gerr := r.script(p, m)
	want, werr := alloc.Step(&r.s, p, m, r.now, r.srv)
	var se *alloc.SpecError
	switch {
	case werr != nil || gerr != nil:
		if !errors.As(werr, &se) || gerr == nil || !strings.Contains(gerr.Error(), "STORMGUARD_SPEC "+strconv.FormatInt(se.Live, 10)+" "+se.Held) {
			r.t.Fatalf("step %d: %+v: errors differ: script %v, core %v", r.steps, m, gerr, werr)
		}
		r.specErrs++
	case got != want:
		r.t.Fatalf("step %d: %+v at %d:\nscript %+v\n  core %+v", r.steps, m, r.now, got, want)
	default:
		r.seen[m.ID] = want
		r.notes[want.Note]++
		if want.Grant > 0 {
			r.grants++
		}
		if want.Next > 0 {
			r.unmet++
		}
		if want.Dup {
			r.dups++
		}
	}
	r.steps++
}

// script runs the step script with an explicit time.
func (r *diffRun) script(p alloc.Params, m alloc.Message) (alloc.Answer, error) {
	v, err := stepScript.Run(context.Background(), r.rdb, r.keys, stepArgs(p, DefaultStateTTL, m, r.now)).Slice()
	if err != nil {
		return alloc.Answer{}, err
	}
	return parseAnswer(v)
}

// compareStates checks that Redis holds what the core holds.
func (r *diffRun) compareStates() {
	r.t.Helper()
	ctx := context.Background()
	h, err := r.rdb.HGetAll(ctx, r.keys[0]).Result()
	if err != nil {
		r.t.Fatal(err)
	}
	if !r.s.Exists() {
		if len(h) != 0 {
			r.t.Fatalf("step %d: the core holds no state, Redis holds %v", r.steps, h)
		}
		return
	}
	want := map[string]string{
		"spec": r.s.Spec, "gen": r.s.Gen, "ver": strconv.FormatInt(r.s.Ver, 10), "srv": r.s.Srv,
		"clock": strconv.FormatInt(r.s.Clock, 10),
	}
	if r.s.Since != 0 {
		want["since"] = strconv.FormatInt(r.s.Since, 10)
	}
	if r.p.Kind == alloc.Bucket {
		want["level"] = strconv.FormatInt(r.s.Level, 10)
	} else {
		want["lo"] = strconv.FormatInt(r.s.Lo, 10)
		for k, v := range r.s.SlotQ {
			if v != 0 {
				want["q:"+strconv.FormatInt(k, 10)] = strconv.FormatInt(v, 10)
			}
		}
		for k, v := range r.s.SlotR {
			if v != 0 {
				want["r:"+strconv.FormatInt(k, 10)] = strconv.FormatInt(v, 10)
			}
		}
	}
	for _, id := range r.ids {
		if q, g, n, ok := r.s.Record(id); ok {
			want["s:"+id] = strconv.FormatInt(q, 10)
			want["a:"+id] = fmt.Sprintf("%d %d", g, n)
		}
	}
	got := map[string]string{}
	for k, v := range h {
		if (strings.HasPrefix(k, "q:") || strings.HasPrefix(k, "r:")) && v == "0" {
			continue
		}
		got[k] = v
	}
	if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
		r.t.Fatalf("step %d: states differ:\nRedis %v\n core %v", r.steps, sorted(got), sorted(want))
	}
	for i, z := range []map[string]int64{r.s.Members(), r.s.Waiting()} {
		zs, err := r.rdb.ZRangeWithScores(ctx, r.keys[1+i], 0, -1).Result()
		if err != nil {
			r.t.Fatal(err)
		}
		gz := map[string]int64{}
		for _, e := range zs {
			gz[e.Member.(string)] = int64(e.Score)
		}
		if fmt.Sprint(gz) != fmt.Sprint(z) {
			r.t.Fatalf("step %d: %s differ:\nRedis %v\n core %v", r.steps, r.keys[1+i], gz, z)
		}
	}
}

func sorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// runID reads the server's run_id.
func runID(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			return v
		}
	}
	t.Fatal("no run_id in INFO server")
	return ""
}

// TestScriptMatchesCore: 4 sequences of 2,500 random messages for each kind
// of budget; every answer of the script equals the core's, and so do the
// states every 25 messages and at the end.
func TestScriptMatchesCore(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	id := runID(t, rdb)
	steps := 2500
	if testing.Short() {
		steps = 600
	}
	for _, kind := range []alloc.Kind{alloc.Bucket, alloc.Window} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("kind%d/seed%d", kind, seed), func(t *testing.T) {
				r := newDiffRun(t, rdb, id, kind, seed)
				for r.steps < steps {
					r.step()
					if r.steps%25 == 0 {
						r.compareStates()
					}
				}
				r.compareStates()
				t.Logf("%d messages: %d grants, %d unmet, %d repeats, %d refused for another spec; notes %v",
					r.steps, r.grants, r.unmet, r.dups, r.specErrs, r.notes)
				// The sequence must have exercised every branch.
				for what, n := range map[string]int{"grants": r.grants, "unmet needs": r.unmet, "repeats": r.dups,
					"created": r.notes["created"], "lost": r.notes["lost"], "moved": r.notes["moved"], "stale": r.notes["stale"]} {
					if n == 0 && !testing.Short() {
						t.Errorf("the sequence made no %s", what)
					}
				}
			})
		}
	}
}
