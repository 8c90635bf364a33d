package fleet

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet/alloc"
)

// Level is the state of a shared budget as Redis holds it, read by [Peek].
// The amounts do not count what the processes hold (granted, not yet spent)
// or earned and not yet sent.
type Level struct {
	Key        string      `json:"key"`
	Exists     bool        `json:"exists"` // false: no process has used the key (or it expired, or Redis lost it)
	Kind       budget.Kind `json:"kind,omitempty"`
	Generation string      `json:"generation,omitempty"` // changes when the state is built again
	Processes  int         `json:"processes"`            // heard from within three heartbeats
	Waiting    int         `json:"waiting"`              // whose need the pool could not meet lately
	ServerTime time.Time   `json:"server_time"`
	Version    int64       `json:"version,omitempty"` // messages applied in this generation

	// Token bucket, in tokens: what the pool holds, within [0, Capacity].
	Capacity float64 `json:"capacity,omitempty"`
	Pool     float64 `json:"pool,omitempty"`

	// Window: requests and retries granted in the window now, and the
	// retries it allows.
	Window   time.Duration `json:"window,omitempty"`
	Requests int64         `json:"requests,omitempty"`
	Retries  float64       `json:"retries,omitempty"`
	Allowed  float64       `json:"allowed,omitempty"`
}

// Peek reads the state of the budget named key without changing it, with
// the time of the Redis server. It is what `stormguard fleet show` prints. A
// state that is corrupt is reported as such (the next round trip of a
// process rebuilds it).
func Peek(ctx context.Context, rdb redis.UniversalClient, key string) (Level, error) {
	if err := checkName("budget name", key); err != nil {
		return Level{}, err
	}
	v, err := peekScript.Run(ctx, rdb, budgetKeys(key)).Slice()
	if err != nil {
		return Level{}, fmt.Errorf("fleet: reading budget %q: %w", key, err)
	}
	lv, err := parsePeek(v)
	lv.Key = key
	if err != nil {
		return lv, fmt.Errorf("fleet: budget %q: %w", key, err)
	}
	return lv, nil
}

// peekLen is the length of the peek script's reply.
const peekLen = 9

// parsePeek reads spec, gen, ver, now, a, b, live, waiting and what is
// corrupt, as the peek script returns them.
func parsePeek(v []any) (Level, error) {
	var lv Level
	if len(v) != peekLen {
		return lv, fmt.Errorf("unexpected reply of %d fields, want %d", len(v), peekLen)
	}
	var n [6]int64 // ver, now, a, b, live, waiting
	for i := range n {
		x, ok := v[i+2].(int64)
		if !ok {
			return lv, fmt.Errorf("unexpected reply field %d: %.40q", i+2, fmt.Sprint(v[i+2]))
		}
		n[i] = x
	}
	ver, now, a, b, live, waiting := n[0], n[1], n[2], n[3], n[4], n[5]
	if ver < 0 || now < 0 || now > maxAmount*10 || live < 0 || live > math.MaxInt32 || waiting < 0 || waiting > math.MaxInt32 ||
		a < -maxAmount || a > maxAmount || b < -maxAmount || b > maxAmount {
		return lv, fmt.Errorf("unexpected reply %v", n)
	}
	lv.ServerTime = time.UnixMicro(now)
	bad, ok := v[8].(string)
	if !ok {
		return lv, fmt.Errorf("unexpected reply field 8: %.40q", fmt.Sprint(v[8]))
	}
	spec, _ := v[0].(string)
	lv.Generation, _ = v[1].(string)
	if bad != "" {
		lv.Exists = true
		return lv, fmt.Errorf("the state in Redis is corrupt (%.60s); the next round trip of a process rebuilds it", bad)
	}
	if v[0] == nil {
		return lv, nil
	}
	lv.Exists = true
	lv.Processes, lv.Waiting = int(live), int(waiting)
	lv.Version = ver
	f := strings.Fields(spec)
	num := func(s string) (int64, bool) {
		x, err := strconv.ParseInt(s, 10, 64)
		return x, err == nil && x >= 0 && x <= maxAmount
	}
	switch {
	case len(f) == 5 && f[0] == string(budget.KindTokenBucket):
		capacity, ok := num(f[1])
		if !ok {
			break
		}
		lv.Kind = budget.KindTokenBucket
		lv.Capacity = float64(capacity) / alloc.Unit
		lv.Pool = float64(a) / alloc.Unit
		return lv, nil
	case len(f) == 4 && f[0] == string(budget.KindWindow):
		width, ok1 := num(f[1])
		ratio, ok2 := num(f[2])
		floor, ok3 := num(f[3])
		if !ok1 || !ok2 || !ok3 || width > int64(time.Hour/time.Microsecond) {
			break
		}
		lv.Kind = budget.KindWindow
		lv.Window = alloc.Slots * time.Duration(width) * time.Microsecond
		lv.Requests = a
		lv.Retries = float64(b) / alloc.Unit
		lv.Allowed = math.Floor((float64(ratio)*float64(a) + float64(floor)) / 1e6)
		return lv, nil
	}
	return lv, fmt.Errorf("unknown spec %.80q", spec)
}
