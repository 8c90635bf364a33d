package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/stormguard/stormguard/policyfile"
)

const checkHelp = `Usage: stormguard check FILE [--json]

Validates the policy file FILE (YAML or JSON; - reads standard input): the
client policy a service applies to each dependency (retries, backoff,
retry budget, pushback, hedging, circuit breaker) and its server's
defenses (deadline bound, concurrency limit, queue). It is the file that
production reads with package policyfile and that a scenario's client
references with policy_file, so that stormguard sim runs the same policy;
docs/policy.md describes the format.

check reads FILE as production does, strictly, and reports every problem
on stderr as FILE:LINE: PATH: message: a syntax error, an unknown field, a
value of the wrong type (durations are strings such as "50ms"), an unknown
preset, an explicit 0 or empty value where the field would silently take
its default, and any value retry, breaker or the servers would refuse.

For a valid file it prints the effective policy on stdout: the file with
every default filled in, each value that the file does not give marked
"# default" or "# preset NAME". Read back, that output gives the same
policy.

Flags (before or after FILE; -flag and --flag are the same):
  --json      print the effective policy as one JSON object instead (the
              same keys, without the comments; it reads back too)
  -h, --help  print this help

Exit status: 0 the file is valid, 2 usage error or a bad file (missing,
unreadable, or any problem in it).
`

// runCheck is `stormguard check`.
func runCheck(_ context.Context, args []string, stdout, _ io.Writer) error {
	var asJSON bool
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&asJSON, "json", false, "print the effective policy as JSON")
	pos, helped, err := parseCommand(fs, args, checkHelp, stdout)
	if helped || err != nil {
		return err
	}
	if err := atMostOneFile("check", pos, true); err != nil {
		return err
	}
	f, err := policyfile.Load(pos[0])
	if err != nil {
		return badInput(err)
	}
	var out []byte
	if asJSON {
		out, err = f.EffectiveJSON()
	} else {
		out, err = f.EffectiveYAML()
		if err == nil {
			out = append([]byte(fmt.Sprintf("# %s is valid. Its effective policy, every default filled in:\n", f.Name)), out...)
		}
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
