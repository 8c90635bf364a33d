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
)

// Level is the state of a shared budget as Redis holds it, read by [Peek].
// The amounts do not count what the processes have earned or been granted
// since their last round trip.
type Level struct {
	Key        string      `json:"key"`
	Exists     bool        `json:"exists"` // false: no process has used the key (or it expired, or Redis lost it)
	Kind       budget.Kind `json:"kind,omitempty"`
	Generation string      `json:"generation,omitempty"` // changes when the state is built again
	Processes  int         `json:"processes"`            // live leases
	ServerTime time.Time   `json:"server_time"`
	Version    int64       `json:"version,omitempty"` // messages applied in this generation
	// Probation, if not zero, is when the probation of a state built
	// again or moved to another server ends: until then the pool grants
	// nothing (see the package documentation).
	Probation time.Time `json:"probation,omitzero"`

	// Token bucket, in tokens. Tokens = Pool + Held, within [0, Capacity]
	// (Pool is negative while the processes hold more than the capacity
	// after refunds; it comes back on their next round trips).
	Capacity float64 `json:"capacity,omitempty"`
	Tokens   float64 `json:"tokens,omitempty"`
	Pool     float64 `json:"pool,omitempty"`
	Held     float64 `json:"held,omitempty"` // by the leases of the processes

	// Window: requests and retries in the window now (the retries count
	// the leases handed out, used or not), and the retries it allows.
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
	base := "stormguard:budget:{" + key + "}"
	v, err := peekScript.Run(ctx, rdb, []string{base, base + ":members"}).Slice()
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

// parsePeek reads spec, gen, a, b, live, now, probation, version and what
// is corrupt, as the peek script returns them.
func parsePeek(v []any) (Level, error) {
	var lv Level
	if len(v) != peekLen {
		return lv, fmt.Errorf("unexpected reply of %d fields, want %d", len(v), peekLen)
	}
	var n [6]int64 // a, b, live, now, probation, version
	for i, j := range []int{2, 3, 4, 5, 6, 7} {
		x, ok := v[j].(int64)
		if !ok {
			return lv, fmt.Errorf("unexpected reply field %d: %.40q", j, fmt.Sprint(v[j]))
		}
		n[i] = x
	}
	a, b, live, now, prob, ver := n[0], n[1], n[2], n[3], n[4], n[5]
	if live < 0 || live > math.MaxInt32 || now < 0 || prob < 0 || ver < 0 || !amount(a) || !amount(b) || now > maxAmount || prob > maxAmount {
		return lv, fmt.Errorf("unexpected reply %v", n)
	}
	lv.ServerTime = time.UnixMilli(now)
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
	lv.Processes = int(live)
	lv.Version = ver
	if prob > now {
		lv.Probation = time.UnixMilli(prob)
	}
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
		lv.Capacity = float64(capacity) / milliPerUnit
		lv.Pool = float64(a) / milliPerUnit
		lv.Held = float64(b) / milliPerUnit
		lv.Tokens = lv.Pool + lv.Held
		return lv, nil
	case len(f) == 4 && f[0] == string(budget.KindWindow):
		width, ok1 := num(f[1])
		ratio, ok2 := num(f[2])
		floor, ok3 := num(f[3])
		if !ok1 || !ok2 || !ok3 || width > int64(time.Hour/time.Microsecond) {
			break
		}
		lv.Kind = budget.KindWindow
		lv.Window = 10 * time.Duration(width) * time.Microsecond
		lv.Requests = a
		lv.Retries = float64(b) / milliPerUnit
		lv.Allowed = math.Floor((float64(ratio)*float64(a) + float64(floor)) / 1e6)
		return lv, nil
	}
	return lv, fmt.Errorf("unknown spec %.80q", spec)
}
