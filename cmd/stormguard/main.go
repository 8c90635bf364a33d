// Command stormguard runs the stormguard simulator from the command line.
//
//	stormguard sim [FILE] [--out DIR] [--seed N] [--json]
//	stormguard version
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
  stormguard version
  stormguard help [COMMAND]

Commands:
  sim       simulate the runs of a scenario file (without FILE, the built-in
            HotOS '21 toy example: naive retries against stormguard's defenses)
  version   print the version of stormguard and of Go
  help      print this help, or a command's (stormguard help sim)

Exit status: 0 success, 1 error (a bad scenario file, a failed run),
2 usage error (an unknown command or flag), 130 interrupted (Ctrl-C).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exit(err, os.Stderr))
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

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
	switch {
	case errors.As(err, &u):
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
	case "version":
		if len(rest) > 0 {
			return usageError{"version takes no arguments"}
		}
		fmt.Fprintf(stdout, "stormguard %s %s\n", version(), runtime.Version())
		return nil
	case "help", "-h", "-help", "--help":
		switch {
		case len(rest) == 0:
			fmt.Fprint(stdout, mainHelp)
		case rest[0] == "sim":
			fmt.Fprint(stdout, simHelp)
		default:
			return usageError{fmt.Sprintf("help: unknown command %q (commands: sim, version, help)", rest[0])}
		}
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command %q (commands: sim, version, help; see stormguard --help)", cmd)}
	}
}

// version is the module version the binary was built from, or "(devel)".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
