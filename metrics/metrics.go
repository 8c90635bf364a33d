package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/metrics/schema"
)

// Labels says what a set of series describes.
type Labels struct {
	// Target is the service the attempts are addressed to: on the client,
	// the dependency called ("payments"); on the server, the service
	// itself. It is the value of label target on every series.
	Target string
}

// constLabels returns the labels every series of l carries.
func constLabels(l Labels) prometheus.Labels {
	return prometheus.Labels{schema.LabelTarget: l.Target}
}

// varLabels returns the label names of m beyond target.
func varLabels(m schema.Metric) []string { return m.Labels[1:] }

// desc returns the descriptor of metric m for target l.
func desc(m schema.Metric, l Labels) *prometheus.Desc {
	return prometheus.NewDesc(m.Name, m.Help, varLabels(m), constLabels(l))
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
