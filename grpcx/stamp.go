package grpcx

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"google.golang.org/grpc/metadata"

	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/wire"
)

// stamp is how a call puts stormguard's metadata on its attempts
// (stormguard-attempt and grpc-previous-rpc-attempts from the second on,
// and stormguard-criticality on every attempt unless it is the default or
// the caller set it) while keeping the caller's outgoing metadata. A first
// try carries no attempt number: an absent stormguard-attempt means 1 at
// every stormguard server (and at gRPC's, an absent
// grpc-previous-rpc-attempts), so a first try with the default
// criticality goes out with the caller's context as it is. The stamp is
// decided once per call, and it copies the caller's metadata only when
// that metadata carries an attempt key of its own, which this layer must
// replace or remove:
//
//   - the caller's context has no outgoing metadata (the common case): each
//     attempt's context is metadata.NewOutgoingContext with a map built
//     once for the process and never written, one per attempt number and
//     criticality (attempts past sharedAttempts get a map of their own);
//   - the caller's metadata has no attempt key: the stamps are appended
//     with metadata.AppendToOutgoingContext, which keeps the caller's map as
//     it is, uncopied;
//   - it has one (a proxy that passes its incoming metadata on, say): the
//     caller's metadata is copied once, and each attempt gets that copy with
//     the attempt keys replaced (removed on the first try).
type stamp struct {
	mode stampMode
	crit wire.Criticality // to propagate; wire.DefaultCriticality: none
	base metadata.MD      // stampCopy only: the caller's metadata
}

type stampMode uint8

const (
	stampShared stampMode = iota
	stampAppend
	stampCopy
)

// newStamp decides how the call made with ctx stamps its attempts.
func newStamp(ctx context.Context) stamp {
	s := stamp{crit: deadline.Criticality(ctx)}
	var keys uint8
	if outgoingKey == nil {
		keys = valueKeys(ctx) // the stamps are appended, whatever ctx holds
	} else if v := ctx.Value(outgoingKey); v == nil {
		return s // no outgoing metadata, the common case
	} else if raw := rawOf(v); raw != nil {
		if len(raw.md) > 0 || raw.mayHaveKeys() {
			keys = raw.keys()
		}
	} else {
		keys = valueKeys(ctx)
	}
	s.mode = stampAppend
	if keys != 0 {
		s.inherit(ctx, keys)
	}
	return s
}

// inherit is newStamp's decision for a caller whose metadata has some of
// stormguard's keys: its own criticality is not stamped over, and its
// attempt keys are replaced in a copy of its metadata.
func (s *stamp) inherit(ctx context.Context, keys uint8) {
	if keys&keyCrit != 0 {
		s.crit = wire.DefaultCriticality // the caller's own says it
	}
	if keys&keyAttempts != 0 {
		s.mode = stampCopy
		s.base, _ = metadata.FromOutgoingContext(ctx) // a copy, keys in lower case
	}
}

// context returns ctx with the outgoing metadata of attempt n. The attempt
// number is this layer's own, never inherited from the caller's metadata.
// A first try with nothing to stamp gets ctx itself.
func (s stamp) context(ctx context.Context, n int) context.Context {
	switch s.mode {
	case stampShared:
		if n == 1 && s.crit == wire.DefaultCriticality {
			return ctx
		}
		if n <= sharedAttempts {
			if v := sharedValue[n-1][critIndex(s.crit)]; v != nil {
				return &stampedCtx{Context: ctx, md: v}
			}
			return metadata.NewOutgoingContext(ctx, sharedMD[n-1][critIndex(s.crit)])
		}
		return metadata.NewOutgoingContext(ctx, attemptMD(nil, n, s.crit))
	case stampAppend:
		switch {
		case n == 1 && s.crit == wire.DefaultCriticality:
			return ctx
		case n == 1:
			return metadata.AppendToOutgoingContext(ctx, keyCriticality, s.crit.String())
		case s.crit == wire.DefaultCriticality:
			return metadata.AppendToOutgoingContext(ctx, keyAttempt, attemptValue(n), wire.KeyGRPCPreviousAttempts, attemptValue(n-1))
		}
		return metadata.AppendToOutgoingContext(ctx, keyAttempt, attemptValue(n), wire.KeyGRPCPreviousAttempts, attemptValue(n-1),
			keyCriticality, s.crit.String())
	}
	return metadata.NewOutgoingContext(ctx, attemptMD(s.base, n, s.crit))
}

// attemptMD returns a new map: base's entries and the stamps of attempt n
// (none of base's attempt keys on a first try, which carries none).
func attemptMD(base metadata.MD, n int, crit wire.Criticality) metadata.MD {
	md := make(metadata.MD, len(base)+3)
	for k, v := range base {
		md[k] = v // grpc-go never modifies a value slice
	}
	if n > 1 {
		md[keyAttempt] = []string{attemptValue(n)}
		md[wire.KeyGRPCPreviousAttempts] = []string{attemptValue(n - 1)}
	} else {
		delete(md, keyAttempt)
		delete(md, wire.KeyGRPCPreviousAttempts)
	}
	if crit != wire.DefaultCriticality {
		md[keyCriticality] = []string{crit.String()}
	}
	return md
}

// sharedAttempts is how many attempt numbers have shared metadata maps.
const sharedAttempts = 8

// sharedMD[n-1][critIndex(c)] is the outgoing metadata of attempt n with
// criticality c for a caller without metadata of its own. The maps are
// never written: metadata.NewOutgoingContext's contract, which grpc-go
// keeps, is that nobody modifies a map once it is in a context.
var sharedMD = func() (m [sharedAttempts][4]metadata.MD) {
	for n := range sharedAttempts {
		for i, c := range [...]wire.Criticality{wire.DefaultCriticality, wire.Sheddable, wire.SheddablePlus, wire.CriticalPlus} {
			m[n][i] = attemptMD(nil, n+1, c)
		}
	}
	return m
}()

// sharedValue[n-1][i] is sharedMD[n-1][i] as grpc-go keeps it in a
// context under outgoingKey (nil if that key is unknown): a value made once
// by metadata.NewOutgoingContext, which a stampedCtx hands out.
var sharedValue = func() (v [sharedAttempts][4]any) {
	if outgoingKey == nil {
		return v
	}
	for n := range sharedMD {
		for i, md := range sharedMD[n] {
			v[n][i] = metadata.NewOutgoingContext(context.Background(), md).Value(outgoingKey)
		}
	}
	return v
}()

// stampedCtx is a caller's context (without outgoing metadata) with the
// outgoing metadata of one attempt, md, grpc-go's own value for one of the
// shared maps: what metadata.NewOutgoingContext(ctx, map) makes, in one
// allocation instead of two (the context, and the value it boxes).
type stampedCtx struct {
	context.Context
	md any
}

func (c *stampedCtx) Value(key any) any {
	if key == outgoingKey {
		return c.md
	}
	return c.Context.Value(key)
}

// critIndex is c's column in sharedMD.
func critIndex(c wire.Criticality) int {
	switch c {
	case wire.Sheddable:
		return 1
	case wire.SheddablePlus:
		return 2
	case wire.CriticalPlus:
		return 3
	}
	return 0
}

// attemptValues are the encodings of the first attempt numbers.
var attemptValues = func() (v [sharedAttempts + 1]string) {
	for n := range v {
		v[n] = wire.FormatAttempt(n)
	}
	return v
}()

// attemptValue is wire.FormatAttempt(n), without allocating for small n.
func attemptValue(n int) string {
	if n >= 1 && n < len(attemptValues) {
		return attemptValues[n]
	}
	return strconv.Itoa(n)
}

// outgoingKey is the context key under which grpc-go keeps outgoing
// metadata, learnt once by watching metadata.ValueFromOutgoingContext ask a
// context for it; nil if it could not be learnt. newStamp uses it to
// tell, without copying anything, whether a context has outgoing metadata.
var outgoingKey = func() any {
	p := &keyProbe{Context: context.Background()}
	metadata.ValueFromOutgoingContext(p, keyAttempt)
	return p.key
}()

// keyProbe is a context that records the first key it is asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}

// The keys newStamp looks for in the caller's outgoing metadata, as bits.
const (
	keyAttempts = 1 << iota // stormguard-attempt or grpc-previous-rpc-attempts
	keyCrit                 // stormguard-criticality
)

// mayHaveKeys reports whether a key appended to raw's context
// (AppendToOutgoingContext) is as long as one of those newStamp looks for:
// a loop that calls nothing, to look over the caller's pairs before
// comparing any.
func (raw *rawOutgoing) mayHaveKeys() bool {
	for _, kv := range raw.added {
		for i := 0; i < len(kv); i += 2 {
			if stampLen(kv[i]) {
				return true
			}
		}
	}
	return false
}

// keys reports which of the keys newStamp looks for raw holds, in any
// case, in one pass over its keys, without copying anything.
func (raw *rawOutgoing) keys() (keys uint8) {
	for k := range raw.md {
		keys |= stampKey(k)
	}
	for _, kv := range raw.added {
		for i := 0; i < len(kv); i += 2 {
			keys |= stampKey(kv[i])
		}
	}
	return keys
}

// valueKeys is what raw.keys reports, for a ctx whose outgoing metadata
// could not be read as a rawOutgoing: from metadata.ValueFromOutgoingContext,
// a scan of every key for each key asked.
func valueKeys(ctx context.Context) (keys uint8) {
	if hasValue(ctx, keyAttempt) || hasValue(ctx, wire.KeyGRPCPreviousAttempts) {
		keys |= keyAttempts
	}
	if hasValue(ctx, keyCriticality) {
		keys |= keyCrit
	}
	return keys
}

// hasValue reports whether ctx's outgoing metadata has key, in any case.
func hasValue(ctx context.Context, key string) bool {
	return metadata.ValueFromOutgoingContext(ctx, key) != nil
}

// stampKey is the bit of the metadata key k if it is, in any case, one of
// those newStamp looks for. The three differ in length, which settles
// most keys without comparing a byte.
func stampKey(k string) uint8 {
	if !stampLen(k) {
		return 0
	}
	return stampKeyFold(k)
}

// stampLen reports whether k is as long as one of the keys newStamp looks
// for.
func stampLen(k string) bool {
	return uint(len(k)) < 64 && stampLens>>len(k)&1 != 0
}

// stampLens has bit n set when one of the keys newStamp looks for is n
// bytes long.
const stampLens = 1<<len(wire.HeaderAttempt) | 1<<len(wire.KeyGRPCPreviousAttempts) | 1<<len(wire.HeaderCriticality)

// stampKeyFold is stampKey for a key of one of the three lengths.
func stampKeyFold(k string) uint8 {
	switch {
	case strings.EqualFold(k, keyAttempt), strings.EqualFold(k, wire.KeyGRPCPreviousAttempts):
		return keyAttempts
	case strings.EqualFold(k, keyCriticality):
		return keyCrit
	}
	return 0
}

// rawOutgoing is the value grpc-go keeps under outgoingKey, as grpc-go
// 1.85 lays it out (metadata.rawMD): the map given to NewOutgoingContext
// and the key-value pairs appended since by AppendToOutgoingContext, each
// call's pairs a slice. grpc-go reads it so itself when it writes a call's
// headers (its internal FromOutgoingContextRaw, which it does not export),
// to send the caller's metadata without merging it; its keys may be in any
// case, as metadata.MD literals have them. grpc-go exports no way to read
// one key without a scan of every key for each key asked
// (ValueFromOutgoingContext) or a copy of the whole (FromOutgoingContext),
// so this package reads the value itself, and only when it has checked at
// start, on a value grpc-go made, that the layout is this one (rawType).
type rawOutgoing struct {
	md    metadata.MD
	added [][]string
}

// rawType is the type word of grpc-go's outgoing value when its layout is
// rawOutgoing's, nil otherwise (every read then goes through metadata's
// functions).
var rawType = learnRaw()

// eface is the layout of an interface value without methods.
type eface struct {
	typ, data unsafe.Pointer
}

// rawOf returns v, a value found under outgoingKey, as a rawOutgoing, or
// nil if v is not of the type learnt at start.
func rawOf(v any) *rawOutgoing {
	e := (*eface)(unsafe.Pointer(&v))
	if rawType == nil || e.typ != rawType {
		return nil
	}
	return (*rawOutgoing)(e.data)
}

// learnRaw returns the type word of grpc-go's outgoing value if it has
// rawOutgoing's fields (names, types, offsets, size) and reads back, through
// them, what was put in it; nil if anything differs.
func learnRaw() unsafe.Pointer {
	if outgoingKey == nil {
		return nil
	}
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.MD{"Probe-Key": {"v"}})
	v := metadata.AppendToOutgoingContext(ctx, "a", "b", "c", "d").Value(outgoingKey)
	t, want := reflect.TypeOf(v), reflect.TypeFor[rawOutgoing]()
	if t == nil || t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[metadata.MD]().PkgPath() ||
		t.Size() != want.Size() || t.NumField() != want.NumField() {
		return nil
	}
	for i := range want.NumField() {
		f, w := t.Field(i), want.Field(i)
		if f.Name != w.Name || f.Type != w.Type || f.Offset != w.Offset {
			return nil
		}
	}
	e := (*eface)(unsafe.Pointer(&v))
	raw := (*rawOutgoing)(e.data)
	if len(raw.md) != 1 || !slices.Equal(raw.md["Probe-Key"], []string{"v"}) ||
		len(raw.added) != 1 || !slices.Equal(raw.added[0], []string{"a", "b", "c", "d"}) {
		return nil
	}
	return e.typ
}
