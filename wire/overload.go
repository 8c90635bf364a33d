package wire

import "strconv"

// Overload is the value of [HeaderOverload]: what a server that refused a
// request because of overload says about where the overload is. The zero
// value is [OverloadNone].
type Overload uint8

const (
	// OverloadNone: no overload signal. It is never sent; the header is
	// omitted instead.
	OverloadNone Overload = iota
	// OverloadInstance ("instance"): this instance is overloaded. A client
	// may retry, on another instance, after a delay.
	OverloadInstance
	// OverloadService ("service"): the whole service is overloaded. No layer
	// should retry the request.
	OverloadService
)

var overloadNames = [...]string{
	OverloadNone:     "none",
	OverloadInstance: "instance",
	OverloadService:  "service",
}

// String returns the header value for o: "instance" or "service", or "none"
// for OverloadNone, which is never sent.
func (o Overload) String() string {
	if int(o) < len(overloadNames) {
		return overloadNames[o]
	}
	return "Overload(" + strconv.Itoa(int(o)) + ")"
}

// ParseOverload decodes a [HeaderOverload] value, ignoring ASCII case. An
// empty value (the header is absent) and "none" give OverloadNone.
//
// ok is false for any other value; o is then OverloadNone. A client that
// wants to be safe treats such a response as [OverloadInstance]: the server
// said it was overloaded, but not in words this version understands.
func ParseOverload(s string) (o Overload, ok bool) {
	if s == "" {
		return OverloadNone, true
	}
	for i, name := range overloadNames {
		if equalFoldASCII(s, name) {
			return Overload(i), true
		}
	}
	return OverloadNone, false
}

// ExhaustedValue is the value stormguard sends in [HeaderRetriesExhausted].
const ExhaustedValue = "1"

// ParseExhausted reports whether a [HeaderRetriesExhausted] value says that a
// layer below already retried the request and gave up: "1" or "true" (ASCII
// case ignored). Any other value, including an empty one, is false: the header
// is a claim that must be made explicitly.
func ParseExhausted(s string) bool {
	return s == "1" || equalFoldASCII(s, "true")
}
