package grpcpolicy_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/stormguard/stormguard/policyfile"
	"github.com/stormguard/stormguard/policyfile/grpcpolicy"
)

// A gRPC client and server that follow one policy file while they run:
// each call to db is decided by the version current when it starts, and
// each call the server receives by the current version's server block.
func ExampleLive() {
	dir, err := os.MkdirTemp("", "policy")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte("clients:\n  db: stormguard\nserver:\n  max_timeout: 5s\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	live, err := policyfile.NewLive(path)
	if err != nil {
		log.Fatal(err)
	}
	defer live.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := lis.Addr().String()

	grpcLive, err := grpcpolicy.NewLive(live)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, append(grpcLive.DialOptions("db"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	srv := grpc.NewServer(grpcLive.ServerOptions()...)

	healthpb.RegisterHealthServer(srv, &health{check: func(context.Context) error { return nil }})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err, grpcLive.ServerStats().Goodput)
	// Output: SERVING <nil> 1
}
