package grpcx

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/supersede"
	"github.com/stormguard/stormguard/wire"
)

// Metadata of request supersession (see [ServerConfig].Supersede).
const (
	// KeyIdempotencyKey is the metadata key that carries a unary call's
	// idempotency key, the gRPC twin of the IETF httpapi draft's
	// Idempotency-Key header: one value of 1 to 255 printable ASCII
	// characters (a UUID, say), optionally as a quoted string.
	KeyIdempotencyKey = "idempotency-key"
	// KeySuperseded marks an answer of supersession in the trailer:
	// "replaced" on the ALREADY_EXISTS of a call a newer one with its key
	// replaced in the queue, "joined" on a reply replayed from a twin in
	// service.
	KeySuperseded = "stormguard-superseded"
)

var (
	// mdReplaced goes with errSuperseded. The negative pushback tells any
	// gRFC A6 client not to retry, whatever codes its policy retries: a
	// retry would supersede the newer call in turn.
	mdReplaced = metadata.MD{KeySuperseded: {"replaced"}, wire.KeyGRPCRetryPushback: {"-1"}}
	mdJoined   = metadata.MD{KeySuperseded: {"joined"}}

	errSuperseded = status.Error(codes.AlreadyExists, "grpcx: superseded: a newer call with the same idempotency-key took this one's place; its answer is that call's; do not retry this one")
	errKeyBusy    = status.Error(codes.ResourceExhausted, "grpcx: too many calls with this idempotency-key already wait for the one in progress; retry after the delay")
)

// keyOf reads a call's idempotency key and its scope, for the gate: ""
// when the call has no key, more than one value, or a malformed one (it is
// then served as if it had none). The scope is the full method and who
// makes the call: the caller as scope tells it, if set, else its
// credentials, the values of its authorization and cookie metadata and its
// TLS client certificate, where present (see supersede.Scope).
func keyOf(ctx context.Context, md metadata.MD, method string, scope func(context.Context, string) string) (key, keyScope string) {
	k, ok := IdempotencyKey(md)
	if !ok {
		return "", ""
	}
	var sc supersede.Scope
	sc.Add('m', method)
	if scope != nil {
		sc.Add('s', scope(ctx, method))
		return k, sc.String()
	}
	var cert []byte
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			cert = ti.State.PeerCertificates[0].Raw
		}
	}
	sc.Caller(md["authorization"], md["cookie"], cert)
	return k, sc.String()
}

// IdempotencyKey returns the idempotency key of a call's incoming metadata
// ([KeyIdempotencyKey]), as the Server reads it: ok is false when there is
// none, more than one value, or a malformed one (see supersede.ParseKey;
// surrounding spaces and one pair of quotes are removed).
func IdempotencyKey(md metadata.MD) (key string, ok bool) {
	v := md[KeyIdempotencyKey]
	if len(v) != 1 {
		return "", false
	}
	k, err := supersede.ParseKey(v[0])
	return k, err == nil
}

// unaryReply is a unary call's answer, kept to answer the calls that
// joined it: the reply message (shared, only read: grpc-go marshals it for
// each), the error, and the header and trailer metadata its handler set.
type unaryReply struct {
	resp            any
	err             error
	header, trailer metadata.MD
}

// captureStream passes the metadata a handler sets on to the call's own
// stream, and keeps a copy.
type captureStream struct {
	grpc.ServerTransportStream
	mu              sync.Mutex
	header, trailer metadata.MD
}

func (c *captureStream) SetHeader(md metadata.MD) error {
	err := c.ServerTransportStream.SetHeader(md)
	if err == nil {
		c.mu.Lock()
		c.header = metadata.Join(c.header, md)
		c.mu.Unlock()
	}
	return err
}

func (c *captureStream) SendHeader(md metadata.MD) error {
	err := c.ServerTransportStream.SendHeader(md)
	if err == nil {
		c.mu.Lock()
		c.header = metadata.Join(c.header, md)
		c.mu.Unlock()
	}
	return err
}

func (c *captureStream) SetTrailer(md metadata.MD) error {
	err := c.ServerTransportStream.SetTrailer(md)
	if err == nil {
		c.mu.Lock()
		c.trailer = metadata.Join(c.trailer, md)
		c.mu.Unlock()
	}
	return err
}

// reply returns what the handler answered, with the metadata it set.
func (c *captureStream) reply(resp any, err error) *unaryReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &unaryReply{resp: resp, err: err, header: c.header, trailer: c.trailer}
}

// sendReplay answers a call that joined its twin with the twin's answer.
func sendReplay(ctx context.Context, rp *unaryReply) (any, error) {
	if len(rp.header) > 0 {
		_ = grpc.SetHeader(ctx, rp.header)
	}
	trailer := metadata.Join(rp.trailer, mdJoined)
	if rp.err != nil && exhausted(rp.err) {
		trailer = metadata.Join(trailer, mdExhausted)
	}
	_ = grpc.SetTrailer(ctx, trailer)
	return rp.resp, rp.err
}
