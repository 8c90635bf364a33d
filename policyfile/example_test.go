package policyfile_test

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/policyfile"
)

// A service loads its policy file at start: one retrier per dependency,
// and its server's defenses.
func Example() {
	f, err := policyfile.Load("../examples/policy/checkout.yaml")
	if err != nil {
		log.Fatal(err) // every problem, as FILE:LINE: path: message
	}
	db, err := f.Client("db")
	if err != nil {
		log.Fatal(err)
	}
	r, err := db.NewRetrier() // the policy, its budget and its breaker
	if err != nil {
		log.Fatal(err)
	}
	client := httpx.Client(nil, r) // an *http.Client that retries as the file says

	srv, err := httpx.NewServer(f.HTTPServer())
	if err != nil {
		log.Fatal(err)
	}
	handler := srv.Wrap(http.NotFoundHandler())

	fmt.Println(r.Policy().MaxAttempts, r.Policy().AttemptTimeout, r.Breaker() != nil, f.HTTPServer().MaxTimeout)
	_, _ = client, handler
	// Output: 2 300ms true 5s
}

// A service that follows its policy file while it runs: every request to
// db goes through the version current when it starts, and the server's
// gate is the current version's. metrics.RegisterPolicy(reg, labels,
// live.State) exports the running version and the reloads.
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

	live, err := policyfile.NewLive(path) // an invalid file is an error here
	if err != nil {
		log.Fatal(err)
	}
	defer live.Close()
	if err := live.Watch(); err != nil { // or call live.Reload() on SIGHUP
		log.Fatal(err)
	}
	client := &http.Client{Transport: live.Transport("db", nil)}
	handler := live.Handler(http.NotFoundHandler())

	// In an incident: one attempt per request to db, no restart.
	if err := os.WriteFile(path, []byte("clients:\n  db: {preset: stormguard, max_attempts: 1}\nserver:\n  max_timeout: 5s\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := live.Reload(); err != nil { // Watch would see it within its debounce too
		log.Fatal(err)
	}
	r, _ := live.Current().Retrier("db")
	fmt.Println(r.Policy().MaxAttempts, live.State().Applied)
	_, _ = client, handler
	// Output: 1 1
}
