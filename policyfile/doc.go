// Package policyfile reads a policy file: the client policies a service
// applies to each of its dependencies (retries, backoff, retry budget,
// pushback, deadline awareness, hedging, circuit breaker) and its server's
// defenses (deadline bound, concurrency limit, queue, criticality), in YAML
// or JSON. docs/policy.md describes the format.
//
// One file configures production and the simulator alike:
//
//	f, err := policyfile.Load("policy.yaml")
//	…
//	db, err := f.Client("db")               // the dependency's block
//	r, err := db.NewRetrier()               // a *retry.Retrier with its breaker
//	client := httpx.Client(nil, r)          // or grpcx.DialOptions(r)
//	srv, err := httpx.NewServer(f.HTTPServer())
//
// and a scenario's client that says `policy_file: policy.yaml` and
// `dependency: db` runs, in `stormguard sim`, the same policy through the
// same retry core. `stormguard check FILE` validates a file and prints its
// effective policy.
//
// Reading is strict: an unknown field, a value of the wrong type, an
// unknown preset, an explicit zero or empty value where the field would
// silently take its default, a value past the bounds every file keeps
// ([MaxDuration], [MaxCount], [MaxBytes]) and any value the packages that
// use it would refuse are errors, each with the file's name and line.
//
// [Live] keeps a running service in step with its file: a valid new
// version is swapped in whole, an invalid one refused, and every call is
// decided by one version (docs/policy.md, "Changing a policy while it
// runs"). The configuration
// types themselves (retry.Policy, breaker.Spec, admit.Config) stay plain
// data without a YAML dependency; this package is the one that reads YAML.
package policyfile
