package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Labels says what a set of series describes.
type Labels struct {
	// Target is the service the attempts are addressed to: on the client,
	// the dependency called ("payments"); on the server, the service
	// itself.
	Target string
}

// The sides, values of the side label.
const (
	sideClient = "client"
	sideServer = "server"
)

// The names and help strings of the schema (see the package
// documentation). Both sides register the same name with the same help,
// which Prometheus requires of one metric family.
const (
	nameAttempts   = "stormguard_attempts_total"
	nameRetries    = "stormguard_retries_total"
	nameGoodput    = "stormguard_goodput_total"
	nameThroughput = "stormguard_throughput_total"
	nameGiveUps    = "stormguard_giveups_total"
	nameBudget     = "stormguard_budget_level"
	nameBudgetCap  = "stormguard_budget_capacity"
	nameFallback   = "stormguard_budget_fallback"
	nameOffered    = "stormguard_offered_total"
	nameWasted     = "stormguard_wasted_total"
	nameShed       = "stormguard_shed_total"
	nameExpired    = "stormguard_expired_dropped_total"
	nameLimit      = "stormguard_concurrency_limit"
	nameInFlight   = "stormguard_in_flight"
	nameQueued     = "stormguard_queued"
	nameQueueWait  = "stormguard_queue_wait_seconds"

	helpAttempts   = "Attempts that ended, by outcome: on a client the retry class, on a server the request's fate."
	helpRetries    = "Retries: on a client those granted, on a server the requests that arrived with an attempt number above 1."
	helpGoodput    = "Requests completed successfully while their caller was still waiting."
	helpThroughput = "Attempts completed, whatever their fate: on a client every attempt that ended, on a server every handler that returned."
	helpGiveUps    = "Calls that ended in failure, by why retrying stopped."
	helpBudget     = "Tokens in the retry budget."
	helpBudgetCap  = "Tokens in the retry budget when it is full."
	helpFallback   = "1 while a fleet-wide budget has fallen back to this process's local share (its store is unreachable), else 0."
	helpOffered    = "Requests that arrived at the server (offered load)."
	helpWasted     = "Handlers that returned after their caller had left or their deadline had passed."
	helpShed       = "Requests refused for overload, by reason."
	helpExpired    = "Requests dropped before they started because their deadline had passed or left too little time."
	helpLimit      = "The concurrency limit now."
	helpInFlight   = "Handlers running now."
	helpQueued     = "Requests waiting in the admission queue now."
	helpQueueWait  = "Time admitted requests waited in the admission queue for a slot; 0 for those admitted at once."
)

// constLabels returns the labels every series of side and l carries.
func constLabels(side string, l Labels) prometheus.Labels {
	return prometheus.Labels{"side": side, "target": l.Target}
}

// register registers c with reg, or returns the collector already
// registered in its place (the same series registered twice, say by two
// retriers for one target).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(C); ok {
			return old, nil
		}
	}
	var zero C
	return zero, err
}
