// Command stormguard runs stormguard from the command line: the simulator
// (sim), thresholds and phase diagrams (sweep), the checklist (analyze), the
// real-process lab (lab), rehearsals against a real service (rehearse) and
// the fleet's dials on Redis (fleet).
//
//	stormguard sim [FILE] [--out DIR] [--seed N] [--json] [--max-events N] [--max-memory SIZE]
//	stormguard sweep [FILE] [--out DIR] [--json] [--shard I/N] [--workers N] [--max-events N] [--max-memory SIZE]
//	stormguard analyze FILE [--run NAME] [--out DIR] [--json]
//	stormguard lab [FILE] [--out DIR] [--seed N] [--json]
//	stormguard rehearse FILE [--dry-run] [--out DIR] [--json] [--predict] …
//	stormguard check FILE [--json]
//	stormguard fleet show|set …
//	stormguard version (or --version)
//	stormguard help [COMMAND]
//
// Run `stormguard --help` for the details.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// commandList names the commands in error messages.
const commandList = "sim, sweep, analyze, lab, rehearse, check, fleet, version, help"

// Exit statuses.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130
)

const mainHelp = `stormguard: defenses against retry storms, and a simulator that shows them work.

Usage:
  stormguard sim [FILE] [--out DIR] [--seed N] [--json]
  stormguard sweep [FILE] [--out DIR] [--json] [--shard I/N] [--workers N]
  stormguard analyze FILE [--run NAME] [--out DIR] [--json]
  stormguard lab [FILE] [--out DIR] [--seed N] [--json]
  stormguard rehearse FILE [--dry-run] [--out DIR] [--json] [--predict]
  stormguard check FILE [--json]
  stormguard fleet show|set [flags]
  stormguard version
  stormguard help [COMMAND]

Commands:
  sim       simulate the runs of a scenario file (without FILE, the built-in
            HotOS '21 toy example: naive retries against stormguard's defenses)
  sweep     find where a scenario's system collapses and where it recovers
            (load ramps up and down) and the smallest trigger that tips it
            at each load (a phase diagram); stormguard help sweep
  analyze   compute the retry-storm checklist of a scenario file: amplification
            per dependency path, the load at which each service becomes
            vulnerable, findings (exit status 1 on an error finding)
  lab       run a scenario with real processes on 127.0.0.1 (load generator,
            app, fault proxy, backend) and compare it with the simulator
            (without FILE, the HotOS '21 toy example, naive and defended)
  rehearse  rehearse a retry storm against your own service: the scenario's
            clients send real requests to a real endpoint on 127.0.0.1 with
            faults on the path and the kill switch turned at the runbook's
            times, judged as the simulator judges (stormguard help rehearse)
  check     validate a policy file (a service's client policies per
            dependency and its server's defenses, as production loads
            them) and print its effective policy, every default filled in
  fleet     show or flip the fleet-wide dials (retries off, shed a fraction,
            limit override) and show a shared retry budget, kept in Redis
            for every process (stormguard help fleet)
  version   print the module version, the VCS revision it was built
            from and the Go version (also: stormguard --version)
  help      print this help, or a command's (stormguard help sim)

Exit status: 0 success, 1 findings or a failure (analyze's errors, a run
or a lab role that failed), 2 usage error or bad input (an unknown command
or flag, a missing or invalid file, input beyond a limit: see stormguard
help sim), 130 interrupted (Ctrl-C, SIGTERM).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exit(err, os.Stderr))
}

// usageError is a mistake in the command line, or input refused by a
// limit (a scenario beyond --max-events or --max-memory, a file too
// large): exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// inputError is input a command cannot use — a scenario file that is
// missing, unreadable or invalid, parts of a sweep that do not fit
// together: exit status 2, like a mistake in the command line, so that 1
// keeps its one meaning: findings, or a judged failure.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// badInput marks err, if not nil, as an inputError.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return inputError{err}
}

// exit prints err, one "stormguard: " line per line of it, and returns the
// exit status it calls for.
func exit(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "stormguard: %s\n", line)
	}
	var u usageError
	var in inputError
	switch {
	case errors.As(err, &u), errors.As(err, &in):
		return exitUsage
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitError
}

// run is the whole command: args without the program name, output to
// stdout and stderr. The caller prints the error it returns (see exit).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainHelp)
		return usageError{"no command given"}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "sim":
		return runSim(ctx, rest, stdout, stderr)
	case "sweep":
		return runSweep(ctx, rest, stdout, stderr)
	case "analyze":
		return runAnalyze(ctx, rest, stdout, stderr)
	case "fleet":
		return runFleet(ctx, rest, stdout, stderr)
	case "lab":
		return runLab(ctx, rest, stdout, stderr)
	case "rehearse":
		return runRehearse(ctx, rest, stdout, stderr)
	case "check":
		return runCheck(ctx, rest, stdout, stderr)
	case "version", "-version", "--version":
		if len(rest) == 1 && (rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help") {
			fmt.Fprint(stdout, versionHelp)
			return nil
		}
		if len(rest) > 0 {
			return usageError{"version takes no arguments"}
		}
		fmt.Fprintln(stdout, versionLine())
		return nil
	case "help", "-h", "-help", "--help":
		switch {
		case len(rest) == 0:
			fmt.Fprint(stdout, mainHelp)
		case rest[0] == "sim":
			fmt.Fprint(stdout, simHelp)
		case rest[0] == "sweep":
			fmt.Fprint(stdout, sweepHelp)
		case rest[0] == "analyze":
			fmt.Fprint(stdout, analyzeHelp)
		case rest[0] == "lab":
			fmt.Fprint(stdout, labHelp)
		case rest[0] == "rehearse":
			fmt.Fprint(stdout, rehearseHelp)
		case rest[0] == "check":
			fmt.Fprint(stdout, checkHelp)
		case rest[0] == "fleet":
			fmt.Fprint(stdout, fleetHelp)
		case rest[0] == "version":
			fmt.Fprint(stdout, versionHelp)
		default:
			return usageError{fmt.Sprintf("help: unknown command %q (commands: %s)", rest[0], commandList)}
		}
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command %q (commands: %s; see stormguard --help)", cmd, commandList)}
	}
}

const versionHelp = `Usage: stormguard version (or stormguard --version)

Prints the version stormguard was built from: the release tag (v1.2.3)
for go install …@v1.2.3, for a build in a checkout of a tagged commit, or
for a build with -ldflags "-X main.version=v1.2.3"; "(devel)", or a
pseudo-version, for an untagged build. Then the VCS revision and commit
time when the build recorded them ("+dirty": a modified tree), and the Go
version.

Exit status: 0 success, 2 usage error.
`

// versionLine is what `stormguard version` prints: the module version the
// binary was built from — the tag of a tagged commit: go install …@v1.2.3,
// or, since Go 1.24, go build in a checkout whose HEAD is tagged v1.2.3 and
// clean; a pseudo-version or "(devel)" otherwise — the VCS
// revision and commit time when the build recorded them (a build from a
// checkout does, `go install …@v1.2.3` does not: its version says it all),
// "+dirty" for a build from a modified tree, and the Go version.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "stormguard (unknown: built without module support) " + runtime.Version()
	}
	return formatVersion(bi)
}

// version, when set at build time (-ldflags "-X main.version=v1.2.3", as a
// release build from a source archive without its VCS history does), is
// the version printed, whatever the build information says.
var version string

// formatVersion is versionLine on given build information.
func formatVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if version != "" {
		v = version
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	line := "stormguard " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += " revision " + rev
		if dirty {
			line += "+dirty"
		}
		if at != "" {
			line += " (" + at + ")"
		}
	}
	return line + " " + bi.GoVersion
}
