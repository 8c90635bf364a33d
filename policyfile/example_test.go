package policyfile_test

import (
	"fmt"
	"log"
	"net/http"

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
