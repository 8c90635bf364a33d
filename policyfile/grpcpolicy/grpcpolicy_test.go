package grpcpolicy

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/policyfile"
)

func TestServerConfig(t *testing.T) {
	f, err := policyfile.Load("../../examples/policy/checkout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ServerConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTimeout != 5*time.Second || c.MinRemaining != 20*time.Millisecond || c.Limit != f.Server.Limit || c.Queue != f.Server.Queue {
		t.Errorf("ServerConfig = %+v, want the file's server %+v", c, *f.Server)
	}
	if _, err := grpcx.NewServer(c); err != nil {
		t.Errorf("grpcx.NewServer refuses the file's server: %v", err)
	}
}
