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
// the time of the Redis server. It is what `stormguard fleet show` prints.
func Peek(ctx context.Context, rdb redis.UniversalClient, key string) (Level, error) {
	base := "stormguard:budget:{" + key + "}"
	v, err := peekScript.Run(ctx, rdb, []string{base, base + ":members"}).Slice()
	if err != nil {
		return Level{}, fmt.Errorf("fleet: reading budget %q: %w", key, err)
	}
	if len(v) < 6 {
		return Level{}, fmt.Errorf("fleet: reading budget %q: unexpected reply %v", key, v)
	}
	lv := Level{Key: key}
	if ms, ok := v[5].(int64); ok {
		lv.ServerTime = time.UnixMilli(ms)
	}
	spec, ok := v[0].(string)
	if !ok {
		return lv, nil
	}
	lv.Exists = true
	lv.Generation, _ = v[1].(string)
	a, _ := v[2].(int64)
	b, _ := v[3].(int64)
	live, _ := v[4].(int64)
	lv.Processes = int(live)
	f := strings.Fields(spec)
	switch {
	case len(f) == 5 && f[0] == string(budget.KindTokenBucket):
		lv.Kind = budget.KindTokenBucket
		capacity, _ := strconv.ParseInt(f[1], 10, 64)
		lv.Capacity = float64(capacity) / milliPerUnit
		lv.Pool = float64(a) / milliPerUnit
		lv.Held = float64(b) / milliPerUnit
		lv.Tokens = lv.Pool + lv.Held
	case len(f) == 4 && f[0] == string(budget.KindWindow):
		lv.Kind = budget.KindWindow
		width, _ := strconv.ParseInt(f[1], 10, 64)
		ratio, _ := strconv.ParseInt(f[2], 10, 64)
		floor, _ := strconv.ParseInt(f[3], 10, 64)
		lv.Window = 10 * time.Duration(width) * time.Microsecond
		lv.Requests = a
		lv.Retries = float64(b) / milliPerUnit
		lv.Allowed = math.Floor((float64(ratio)*float64(a) + float64(floor)) / 1e6)
	default:
		return lv, fmt.Errorf("fleet: budget %q holds an unknown spec %q", key, spec)
	}
	return lv, nil
}
