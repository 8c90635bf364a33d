// Package examples holds the scenario files that ship with stormguard,
// embedded so the command runs them without a checkout.
package examples

import "embed"

// Scenarios holds every *.yaml scenario of this directory by file name.
//
//go:embed *.yaml
var Scenarios embed.FS

// DefaultName is the scenario `stormguard sim` runs without a file.
const DefaultName = "hotos-toy.yaml"

// Default returns the text of the default scenario, the HotOS '21 toy
// example of a retry storm.
func Default() []byte {
	b, err := Scenarios.ReadFile(DefaultName)
	if err != nil {
		panic("examples: " + DefaultName + " is not embedded: " + err.Error())
	}
	return b
}
