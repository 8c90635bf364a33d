// Package grpcx integrates stormguard with gRPC (google.golang.org/grpc):
// client interceptors that retry as a [retry.Retrier] decides, and a server
// whose interceptors apply the same overload control as httpx.Server. The
// core packages stay free of gRPC; everything gRPC lives here.
//
// # Client
//
// [UnaryClientInterceptor] and [StreamClientInterceptor] are the gRPC shells
// around the retry core, the equivalents of retry.Do and httpx.Transport.
// [DialOptions] installs both and turns grpc-go's own retries off:
//
//	r := retry.MustNew(policy)
//	conn, err := grpc.NewClient(target, append(grpcx.DialOptions(r), creds)...)
//
// # Server
//
// [Server] bounds deadlines, drops expired work before starting it, admits
// calls through an adaptive concurrency limit and a queue that serves first
// tries before retries, and refuses what it cannot serve with the signals
// clients need. [Server.ServerOptions] installs its two interceptors:
//
//	sg, err := grpcx.NewServer(grpcx.ServerConfig{Config: admit.Config{MaxTimeout: 5 * time.Second}})
//	srv := grpc.NewServer(sg.ServerOptions()...)
//
// # Signals on the wire
//
// gRPC metadata carries stormguard's signals under the names of package
// wire, in lower case, beside gRPC's own:
//
//	key                            direction   meaning
//	grpc-timeout                   request     the remaining deadline (grpc-go's own)
//	stormguard-timeout             request     the same, read if present (a caller that is not grpc-go)
//	stormguard-attempt             request     the attempt number of a retry (2, 3 …); absent
//	                                           on a first try, which is what absent means
//	grpc-previous-rpc-attempts     request     attempts before this one (gRFC A6), on retries;
//	                                           read when stormguard-attempt is absent
//	stormguard-criticality         request     critical-plus, critical, sheddable-plus, sheddable
//	grpc-retry-pushback-ms         trailer     the delay before a retry, in ms; negative or
//	                                           malformed: do not retry (gRFC A6)
//	stormguard-overload            trailer     instance (retry elsewhere, after the delay) or
//	                                           service (do not retry, at any layer)
//	stormguard-retries-exhausted   trailer     1: a layer below already retried; do not retry
//
// and status codes carry the rest: UNAVAILABLE for an overloaded instance or
// service, RESOURCE_EXHAUSTED for a throttled client, DEADLINE_EXCEEDED for
// work dropped because its deadline passed.
//
// # One admission gate for HTTP and gRPC
//
// [Server] and httpx.Server are two shells over one [admit.Gate]: the same
// deadline bounds, queue, limit, kill switch, counters and release rules,
// written once in package admit, which knows neither net/http nor gRPC.
// This package only reads a call's metadata into an [admit.Request] and
// turns the gate's answers into status codes and trailers. Both servers
// report in [admit.Stats] ([ServerStats] is that type), so one metrics
// collector serves both.
package grpcx
