package wire

import (
	"fmt"
	"strconv"
)

// Criticality is the value of [HeaderCriticality]: how much the caller cares
// about a request, so that an overloaded server sheds the least critical work
// first. The levels are Google's; a larger value is more critical, so a server
// sheds requests in ascending order. The zero value is [Critical], the default
// for a request that does not say.
//
//	level           header value      meaning
//	CriticalPlus    critical-plus     the most important; shed last
//	Critical        critical          the default for user-facing work
//	SheddablePlus   sheddable-plus    partial unavailability is expected (batch work)
//	Sheddable       sheddable         frequent unavailability is expected; shed first
type Criticality int8

// The criticality levels, from the least to the most critical.
const (
	Sheddable     Criticality = -2
	SheddablePlus Criticality = -1
	Critical      Criticality = 0
	CriticalPlus  Criticality = 1
)

// DefaultCriticality is the criticality of a request that does not carry
// [HeaderCriticality]. It is the zero value.
const DefaultCriticality = Critical

// criticalityNames is indexed by Criticality − Sheddable.
var criticalityNames = [...]string{
	"sheddable",
	"sheddable-plus",
	"critical",
	"critical-plus",
}

// String returns the header value for c, such as "critical-plus".
func (c Criticality) String() string {
	if i := int(c) - int(Sheddable); 0 <= i && i < len(criticalityNames) {
		return criticalityNames[i]
	}
	return "Criticality(" + strconv.Itoa(int(c)) + ")"
}

// ParseCriticality decodes a [HeaderCriticality] value, ignoring ASCII case.
// An empty value (the header is absent) gives [DefaultCriticality].
//
// ok is false for any other value; c is then DefaultCriticality, which is also
// what the receiver should use.
func ParseCriticality(s string) (c Criticality, ok bool) {
	if s == "" {
		return DefaultCriticality, true
	}
	for i, name := range criticalityNames {
		if equalFoldASCII(s, name) {
			return Sheddable + Criticality(i), true
		}
	}
	return DefaultCriticality, false
}

// MarshalText returns the header value for c, so that a configuration
// field of type Criticality reads "critical-plus" in JSON and YAML. A value
// outside the four levels is an error.
func (c Criticality) MarshalText() ([]byte, error) {
	if c < Sheddable || c > CriticalPlus {
		return nil, fmt.Errorf("wire: criticality %d is not one of the four levels", int(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText sets c from a level's name, as [ParseCriticality] reads it
// (ASCII case ignored; empty means [DefaultCriticality]); any other text is
// an error that lists the names.
func (c *Criticality) UnmarshalText(text []byte) error {
	v, ok := ParseCriticality(string(text))
	if !ok {
		return fmt.Errorf("wire: criticality %q is unknown (want critical-plus, critical, sheddable-plus or sheddable)", text)
	}
	*c = v
	return nil
}
