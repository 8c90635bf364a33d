package admit

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/supersede"
)

// SupersedeConfig configures request supersession (see the package
// documentation). A zero field takes the default in brackets.
type SupersedeConfig struct {
	// MaxKeys bounds the keys the gate holds at once [100000]: a request
	// with a new key when it holds MaxKeys is served as if it had none.
	MaxKeys int `json:"max_keys,omitempty" yaml:"max_keys,omitempty"`
	// TTL is how long a key is held after it was last seen (a request with
	// it arrived or started) [1m]; a key some requests wait on is held
	// until its request ends. Set it above MaxTimeout, so that no request
	// outlives its key while queued.
	TTL time.Duration `json:"ttl,omitempty" yaml:"ttl,omitempty"`
	// MaxWaiters bounds the requests that wait for one key's request in
	// service [16]; the next is refused as [Throttled] ([ShedKeyBusy]).
	MaxWaiters int `json:"max_waiters,omitempty" yaml:"max_waiters,omitempty"`
	// MaxReplayBytes bounds the response body the HTTP server keeps, for
	// each request with a key in service, to replay to the requests that
	// wait for it [65536]. A larger response is not replayed: the waiters go
	// through the gate again. The gRPC server shares the reply message
	// itself and ignores it.
	MaxReplayBytes int `json:"max_replay_bytes,omitempty" yaml:"max_replay_bytes,omitempty"`
}

// Defaults and bounds of [SupersedeConfig].
const (
	DefaultMaxReplayBytes = 64 << 10
	maxMaxKeys            = 10_000_000
	maxMaxWaiters         = 1024
	maxMaxReplayBytes     = 64 << 20
)

// WithDefaults returns c with every zero field set to its default.
func (c SupersedeConfig) WithDefaults() SupersedeConfig {
	if c.MaxKeys == 0 {
		c.MaxKeys = supersede.DefaultMax
	}
	if c.TTL == 0 {
		c.TTL = supersede.DefaultTTL
	}
	if c.MaxWaiters == 0 {
		c.MaxWaiters = supersede.DefaultMaxWaiters
	}
	if c.MaxReplayBytes == 0 {
		c.MaxReplayBytes = DefaultMaxReplayBytes
	}
	return c
}

// validate reports a field out of bounds; a nil c (supersession off) is
// valid.
func (c *SupersedeConfig) validate() error {
	switch {
	case c == nil:
		return nil
	case c.MaxKeys < 0 || c.MaxKeys > maxMaxKeys:
		return fmt.Errorf("max_keys %d is outside [0, %d]", c.MaxKeys, maxMaxKeys)
	case c.TTL < 0:
		return fmt.Errorf("ttl %v is negative", c.TTL)
	case c.MaxWaiters < 0 || c.MaxWaiters > maxMaxWaiters:
		return fmt.Errorf("max_waiters %d is outside [0, %d]", c.MaxWaiters, maxMaxWaiters)
	case c.MaxReplayBytes < 0 || c.MaxReplayBytes > maxMaxReplayBytes:
		return fmt.Errorf("max_replay_bytes %d is outside [0, %d]", c.MaxReplayBytes, maxMaxReplayBytes)
	}
	return nil
}
