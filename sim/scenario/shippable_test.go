package scenario

import "testing"

// TestShippable: policies, defenses, capacity, autoscaling, caches and
// runbooks can be shipped; triggers, fault rates, demand, networks,
// people and how a run is judged cannot.
func TestShippable(t *testing.T) {
	for path, want := range map[string]bool{
		"clients.app.policy":             true,
		"clients.app.policy.budget":      true,
		"clients.app.propagate_deadline": true,
		"clients.app.breaker":            true,
		"services.db.defenses":           true,
		"services.db.workers":            true,
		"services.db.queue.capacity":     true,
		"services.db.autoscale":          true,
		"services.db.cache":              true,
		"services.db.cache.size":         true,
		"services.web.calls.0.policy":    true,
		"services.web.calls.db.timeout":  true,
		"actions":                        true,
		"triggers":                       false,
		"triggers.0.duration":            false,
		"services.t1.error_rate":         false,
		"services.db.hang":               false,
		"services.db.crash":              false,
		"services.db.capacity_law":       false,
		"services.db.service_time":       false,
		"services.db.cache.keys":         false,
		"services.web.calls.0.network":   false,
		"clients.app.arrivals.rate":      false,
		"clients.app.humans":             false,
		"clients.app.network.latency":    false,
		"clients":                        false,
		"verdict.healthy":                false,
		"duration":                       false,
		"seed":                           false,
	} {
		if got := Shippable(path); got != want {
			t.Errorf("Shippable(%q) = %v, want %v", path, got, want)
		}
	}
}
