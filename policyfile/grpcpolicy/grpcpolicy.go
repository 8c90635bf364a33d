// Package grpcpolicy is the gRPC side of package policyfile: the server
// block of a policy file as a grpcx.ServerConfig ([ServerConfig]), and a
// live policy file applied to gRPC clients and servers ([Live]), each call
// decided by one whole version. It is apart from policyfile so that a
// program that reads policy files for net/http does not compile gRPC.
package grpcpolicy

import (
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/policyfile"
)

// ServerConfig returns f's server block as a grpcx.ServerConfig, which
// embeds admit.Config, the block's type; the runtime fields (Limiter,
// Dials, the hooks) are for the caller to set. Without a server block it is
// the zero ServerConfig: every default. The error is always nil: every
// field of the block is a field of the gRPC server.
func ServerConfig(f *policyfile.File) (grpcx.ServerConfig, error) {
	var c grpcx.ServerConfig
	if f.Server != nil {
		c.Config = *f.Server
	}
	return c, nil
}
