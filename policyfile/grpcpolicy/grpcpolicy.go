// Package grpcpolicy gives the server block of a policy file as a
// grpcx.ServerConfig. It is apart from policyfile so that a program that
// reads policy files for net/http does not compile gRPC.
package grpcpolicy

import (
	"fmt"
	"strings"

	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/policyfile"
)

// ServerConfig returns f's server block as a grpcx.ServerConfig: every
// configuration field of the block, copied (see policyfile.CopyConfig);
// the runtime fields (Limiter, Dials, the hooks) are for the caller to
// set. Without a server block it is the zero ServerConfig: every default.
// A field the block sets that the gRPC server does not have is an error,
// not a setting silently dropped.
func ServerConfig(f *policyfile.File) (grpcx.ServerConfig, error) {
	var c grpcx.ServerConfig
	if f.Server == nil {
		return c, nil
	}
	if lost := policyfile.CopyConfig(&c, f.Server); len(lost) > 0 {
		return c, fmt.Errorf("%s: server: the gRPC server has no %s", f.Name, strings.Join(lost, ", "))
	}
	return c, nil
}
