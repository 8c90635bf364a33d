package scenario

import "strings"

// shippable lists, per section, the fields whose values a scenario's user
// chooses in production: policies, defenses, capacity, autoscaling,
// caches, runbooks. What happens to the system (triggers, error and hang
// rates, crashes, demand, networks, people, the laws of its capacity) and
// how a run is simulated and judged are not.
var shippable = map[string]map[string]bool{
	"clients": {"policy": true, "timeout": true, "deadline": true, "propagate_deadline": true, "processes": true,
		"fleet": true, "breaker": true, "idempotency_key": true, "policy_file": true, "dependency": true},
	"services": {"workers": true, "queue": true, "limiter": true, "expired_drop": true, "min_remaining": true,
		"defenses": true, "replicas": true, "balancer": true, "autoscale": true, "supersede": true,
		"policy_file": true, "server": true, "on_call_failure": true, "cache": true},
	"calls": {"policy": true, "timeout": true, "propagate_deadline": true, "breaker": true, "policy_file": true, "dependency": true},
	// A cache's keys and their popularity are the workload, not the cache.
	"cache": {"size": true, "ttl": true, "hit_rate": true, "latency": true},
}

// Shippable reports whether a run's change at path (a key of its set:,
// such as services.db.workers or clients.app.policy.budget) is one a
// user can ship: a retry policy, a breaker, a deadline, a server defense,
// capacity (workers, replicas, a cache's size), autoscaling, a runbook
// (actions). A trigger, an error or hang rate, a crash, the demand, a
// network, people's behaviour, a capacity law, the run's length, seed or
// verdict are what the scenario does to the system or how it is judged:
// "What to change" never proposes them.
func Shippable(path string) bool {
	p := strings.Split(path, ".")
	switch p[0] {
	case "actions":
		return true
	case "clients":
		return len(p) >= 3 && shippable["clients"][p[2]]
	case "services":
		switch {
		case len(p) < 3:
			return false
		case p[2] == "calls":
			return len(p) >= 5 && shippable["calls"][p[4]]
		case p[2] == "cache" && len(p) >= 4:
			return shippable["cache"][p[3]]
		}
		return shippable["services"][p[2]]
	}
	return false
}
