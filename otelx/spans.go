package otelx

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/retry"
)

// spanHooks returns hooks that add the client's span events to the span
// of each event's context.
func spanHooks(target string) retry.Hooks {
	return retry.Hooks{OnEvent: func(ctx context.Context, e retry.Event) {
		span := trace.SpanFromContext(ctx)
		if !span.IsRecording() {
			return
		}
		switch e.Kind {
		case retry.EventAttempt:
			span.AddEvent(schema.SpanAttempt, trace.WithAttributes(
				attribute.String(schema.AttrTarget, target),
				attribute.Int(schema.AttrAttempt, e.Attempt),
				attribute.String(schema.AttrTry, schema.Try(e.Attempt)),
				attribute.String(schema.AttrClass, e.Class.String()),
				attribute.Float64(schema.AttrDuration, e.Took.Seconds()),
			))
		case retry.EventRetry:
			span.AddEvent(schema.SpanRetry, trace.WithAttributes(
				attribute.String(schema.AttrTarget, target),
				attribute.Int(schema.AttrAttempt, e.Attempt),
				attribute.Float64(schema.AttrDelay, e.Delay.Seconds()),
			))
		case retry.EventGaveUp:
			kv := []attribute.KeyValue{
				attribute.String(schema.AttrTarget, target),
				attribute.Int(schema.AttrAttempt, e.Attempt),
				attribute.String(schema.AttrReason, schema.GiveUpLabel(e.Reason)),
				attribute.Float64(schema.AttrDuration, e.Took.Seconds()),
			}
			if e.Err != nil {
				kv = append(kv, attribute.String(schema.AttrError, e.Err.Error()))
			}
			span.AddEvent(schema.SpanGaveUp, trace.WithAttributes(kv...))
		case retry.EventBreaker:
			BreakerTransition(ctx, target, e.From.String(), e.To.String())
		}
	}}
}

// ServerEvents returns the function that adds a span event to the active
// span of every request a server answers before, or without, its handler
// running — stormguard.shed (with the shed reason), stormguard.expired,
// stormguard.canceled or stormguard.superseded (replaced, joined) — as the
// server target: set it as the OnRefuse of httpx.ServerConfig, grpcx.ServerConfig or admit.Config. The span is the
// one in the request's context when it reached the server (the server span
// of an OpenTelemetry middleware placed outside the stormguard Server).
func ServerEvents(target string) func(ctx context.Context, attempt int, d admit.Decision) {
	return func(ctx context.Context, attempt int, d admit.Decision) {
		span := trace.SpanFromContext(ctx)
		if !span.IsRecording() {
			return
		}
		outcome, reason, event := schema.Refusal(d)
		kv := []attribute.KeyValue{
			attribute.String(schema.AttrTarget, target),
			attribute.Int(schema.AttrAttempt, attempt),
			attribute.String(schema.AttrTry, schema.Try(attempt)),
			attribute.String(schema.AttrOutcome, outcome),
			attribute.String(schema.AttrAnswer, d.Answer.String()),
		}
		if reason != "" {
			kv = append(kv, attribute.String(schema.AttrReason, reason))
		}
		span.AddEvent(event, trace.WithAttributes(kv...))
	}
}

// AddEvent adds the span event name, with target and attrs, to the active
// span of ctx, if it is recording: the one place for a stormguard
// component that has a context and an event to tell (name one of the
// schema's Span… constants, or a new stormguard.… name documented there).
func AddEvent(ctx context.Context, name, target string, attrs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kv := append([]attribute.KeyValue{attribute.String(schema.AttrTarget, target)}, attrs...)
	span.AddEvent(name, trace.WithAttributes(kv...))
}

// BreakerTransition adds the span event stormguard.breaker.transition —
// the circuit breaker of target went from one state to another ("closed",
// "open", "half-open") — to the active span of ctx: the request whose
// outcome moved the breaker. It is the place for the breaker's hooks to
// call; it depends on nothing of the breaker but the state names.
func BreakerTransition(ctx context.Context, target, from, to string) {
	AddEvent(ctx, schema.SpanBreakerTransition, target,
		attribute.String(schema.AttrFrom, from), attribute.String(schema.AttrTo, to))
}
