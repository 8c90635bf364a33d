// Package grpcpolicy gives the server block of a policy file as a
// grpcx.ServerConfig. It is apart from policyfile so that a program that
// reads policy files for net/http does not compile gRPC.
package grpcpolicy

import (
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/policyfile"
)

// ServerConfig returns f's server block as a grpcx.ServerConfig, whose
// runtime fields (Limiter, Dials, the hooks) are for the caller to set.
// Without a server block it is the zero ServerConfig: every default.
func ServerConfig(f *policyfile.File) grpcx.ServerConfig {
	if f.Server == nil {
		return grpcx.ServerConfig{}
	}
	s := f.Server
	return grpcx.ServerConfig{MaxTimeout: s.MaxTimeout, MinRemaining: s.MinRemaining, RetryAfter: s.RetryAfter,
		Limit: s.Limit, Queue: s.Queue, MaxCriticality: s.MaxCriticality}
}
