package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet"
)

const fleetHelp = `Usage:
  stormguard fleet show [--budget NAME] [--dials NAME] [--json] [CONNECTION]
  stormguard fleet set  [--retries-off[=true|false]] [--shed F] [--limit N]
                        [--dials NAME] [--json] [CONNECTION]

The fleet-wide kill switch and retry budget that stormguard keeps in Redis
(package fleet), for an operator during an incident.

  show   print the fleet's dials (retries off, shed fraction, limit
         override) and the level of a shared retry budget, as Redis holds
         them (the processes also hold leases of a few retries each)
  set    change the fleet's dials: every process that watches them
         (fleet.Watch) applies the change within a second, most within a
         few milliseconds. Only the flags given change. Then print the
         new dials.

Flags of set:
  --retries-off        turn retries off in every process;
                       --retries-off=false turns them back on
  --shed F             shed the fraction F of traffic, in [0, 1] (0: none)
  --limit N            pin every adaptive concurrency limit to N
                       (0 removes the override)

Flags of both:
  --budget NAME        the shared budget to show (default "default")
  --dials NAME         the dials (default "default")
  --json               print one JSON object instead of text

CONNECTION (flags win over the environment):
  --addr HOST:PORT     Redis address ($STORMGUARD_REDIS_ADDR, else
                       127.0.0.1:6379)
  --user NAME          Redis ACL user ($STORMGUARD_REDIS_USER, else none)
  --password-file F    read the Redis password from the file F (its first
                       line); else from $STORMGUARD_REDIS_PASSWORD, else
                       none
  --password P         the password itself: avoid it, since every user of
                       the machine sees it in the process list (a warning
                       says so on stderr)
  --timeout D          give up on Redis after D (default 2s)

Keep a password file out of repositories and readable by its owner only
(a warning says so if others can read it).

Exit status: 0 success, 1 error (Redis unreachable or refusing),
2 usage error or bad input (an unreadable --password-file).
`

// fleetFlags are the flags shared by the fleet commands.
type fleetFlags struct {
	addr, user, password, passwordFile string
	timeout                            time.Duration
	budget, dials                      string
	json                               bool
}

func (f *fleetFlags) set(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "", "Redis `HOST:PORT`")
	fs.StringVar(&f.user, "user", "", "Redis ACL user")
	fs.StringVar(&f.password, "password", "", "Redis password (shows in the process list)")
	fs.StringVar(&f.passwordFile, "password-file", "", "read the Redis password from `FILE`")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Second, "give up on Redis after `D`")
	fs.StringVar(&f.budget, "budget", "default", "the shared budget `NAME`")
	fs.StringVar(&f.dials, "dials", "default", "the dials `NAME`")
	fs.BoolVar(&f.json, "json", false, "print JSON")
}

// client builds the Redis client from the flags, else the environment.
func (f *fleetFlags) client(password string) *redis.Client {
	addr := firstNonEmpty(f.addr, os.Getenv("STORMGUARD_REDIS_ADDR"), "127.0.0.1:6379")
	opts := fleet.ClientOptions(addr, password, f.timeout)
	opts.Username = firstNonEmpty(f.user, os.Getenv("STORMGUARD_REDIS_USER"))
	return redis.NewClient(opts)
}

// maxPasswordFile bounds what --password-file reads.
const maxPasswordFile = 64 << 10

// resolvePassword returns the password from --password-file, --password or
// the environment, in that order, and writes warnings to stderr: a
// password given on the command line, a file others can read.
func (f *fleetFlags) resolvePassword(stderr io.Writer) (string, error) {
	if f.passwordFile == "" {
		if f.password != "" {
			fmt.Fprintln(stderr, "stormguard fleet: warning: --password shows the password to every user of this machine (the process list); use STORMGUARD_REDIS_PASSWORD or --password-file")
			return f.password, nil
		}
		return os.Getenv("STORMGUARD_REDIS_PASSWORD"), nil
	}
	file, err := os.Open(f.passwordFile)
	if err != nil {
		return "", badInput(fmt.Errorf("fleet: --password-file: %w", err))
	}
	defer file.Close()
	if st, err := file.Stat(); err == nil {
		if !st.Mode().IsRegular() {
			return "", badInput(fmt.Errorf("fleet: --password-file %s: not a regular file", f.passwordFile))
		}
		if st.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(stderr, "stormguard fleet: warning: --password-file %s can be read by other users (mode %v); chmod 600 it\n", f.passwordFile, st.Mode().Perm())
		}
	}
	b, err := io.ReadAll(io.LimitReader(file, maxPasswordFile+1))
	if err != nil {
		return "", fmt.Errorf("fleet: --password-file %s: %w", f.passwordFile, err)
	}
	if len(b) > maxPasswordFile {
		return "", badInput(fmt.Errorf("fleet: --password-file %s: longer than %d bytes, not a password file", f.passwordFile, maxPasswordFile))
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", badInput(fmt.Errorf("fleet: --password-file %s: the first line is empty", f.passwordFile))
	}
	return pw, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// fleetView is what show prints with --json.
type fleetView struct {
	Addr   string           `json:"addr"`
	Dials  fleet.DialsState `json:"dials"`
	Budget *fleet.Level     `json:"budget,omitempty"`
}

// quietRedis drops go-redis's own log lines: the command reports the
// error that matters itself.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var silenceRedis sync.Once

// runFleet is `stormguard fleet`.
func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	silenceRedis.Do(func() { redis.SetLogger(quietRedis{}) })
	if len(args) == 0 {
		return usageError{"fleet: want a command, show or set (see stormguard fleet --help)"}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, fleetHelp)
		return nil
	case "show", "set":
	default:
		return usageError{fmt.Sprintf("fleet: unknown command %q (commands: show, set; see stormguard fleet --help)", sub)}
	}

	var f fleetFlags
	fs := flag.NewFlagSet("fleet "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.set(fs)
	var (
		off   bool
		shed  float64
		limit int
	)
	if sub == "set" {
		fs.BoolVar(&off, "retries-off", false, "turn retries off")
		fs.Float64Var(&shed, "shed", 0, "shed the fraction `F` of traffic")
		fs.IntVar(&limit, "limit", 0, "pin concurrency limits to `N`")
	}
	switch err := fs.Parse(rest); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, fleetHelp)
		return nil
	case err != nil:
		return usageError{fmt.Sprintf("fleet %s: %v (see stormguard fleet --help)", sub, err)}
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("fleet %s takes no arguments, got %q (see stormguard fleet --help)", sub, fs.Args())}
	case f.timeout <= 0:
		return usageError{fmt.Sprintf("fleet %s: --timeout must be positive, got %v", sub, f.timeout)}
	case f.password != "" && f.passwordFile != "":
		return usageError{fmt.Sprintf("fleet %s: give --password-file or --password, not both", sub)}
	}

	var change fleet.DialsChange
	if sub == "set" {
		fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "retries-off":
				change.RetriesOff = &off
			case "shed":
				change.ShedFraction = &shed
			case "limit":
				change.LimitOverride = &limit
			}
		})
		switch {
		case change.RetriesOff == nil && change.ShedFraction == nil && change.LimitOverride == nil:
			return usageError{"fleet set: nothing to change; give --retries-off, --shed or --limit (see stormguard fleet --help)"}
		case change.ShedFraction != nil && !(shed >= 0 && shed <= 1):
			return usageError{fmt.Sprintf("fleet set: --shed must be in [0, 1], got %v", shed)}
		case change.LimitOverride != nil && limit < 0:
			return usageError{fmt.Sprintf("fleet set: --limit must be ≥ 0 (0 removes the override), got %d", limit)}
		}
	}

	password, err := f.resolvePassword(stderr)
	if err != nil {
		return err
	}
	rdb := f.client(password)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	addr := rdb.Options().Addr
	if err := rdb.Ping(ctx).Err(); err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			if msg := err.Error(); strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS") {
				return fmt.Errorf("refused by Redis at %s, which requires authentication: %w (give the password in STORMGUARD_REDIS_PASSWORD or --password-file)", addr, err)
			}
			return fmt.Errorf("error from Redis at %s: %w", addr, err)
		}
		return fmt.Errorf("cannot reach Redis at %s: %w", addr, err)
	}

	if sub == "set" {
		st, err := fleet.SetDials(ctx, rdb, f.dials, change)
		if err != nil {
			return err
		}
		if f.json {
			return json.NewEncoder(stdout).Encode(fleetView{Addr: addr, Dials: st})
		}
		fmt.Fprintf(stdout, "Dials %q set: %s\n", f.dials, dialsText(st))
		return nil
	}

	st, err := fleet.GetDials(ctx, rdb, f.dials)
	if err != nil {
		return err
	}
	lv, err := fleet.Peek(ctx, rdb, f.budget)
	if err != nil {
		return err
	}
	if f.json {
		return json.NewEncoder(stdout).Encode(fleetView{Addr: addr, Dials: st, Budget: &lv})
	}
	fmt.Fprintf(stdout, "Redis %s\n", addr)
	fmt.Fprintf(stdout, "Dials %q: %s\n", f.dials, dialsText(st))
	fmt.Fprintf(stdout, "Budget %q: %s\n", f.budget, levelText(lv))
	return nil
}

// dialsText describes the dials in one line.
func dialsText(s fleet.DialsState) string {
	var b strings.Builder
	if s.RetriesOff {
		b.WriteString("retries OFF")
	} else {
		b.WriteString("retries on")
	}
	if s.ShedFraction > 0 {
		fmt.Fprintf(&b, ", shedding %g%% of traffic", 100*s.ShedFraction)
	} else {
		b.WriteString(", nothing shed")
	}
	if s.LimitOverride > 0 {
		fmt.Fprintf(&b, ", concurrency limits pinned to %d", s.LimitOverride)
	} else {
		b.WriteString(", no limit override")
	}
	if s.Version == 0 {
		b.WriteString(" (never set)")
	} else {
		fmt.Fprintf(&b, " (version %d, set %s)", s.Version, s.Updated.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// levelText describes a shared budget in one line.
func levelText(l fleet.Level) string {
	switch {
	case !l.Exists:
		return "not in use (no process has joined it, or Redis lost it)"
	case l.Kind == budget.KindTokenBucket:
		return fmt.Sprintf("token bucket, %g of %g tokens (%g in the pool, %g leased to %s)%s",
			l.Tokens, l.Capacity, l.Pool, l.Held, liveProcesses(l.Processes), probationText(l))
	default:
		return fmt.Sprintf("window of %v, %g retries of %g allowed, %d requests (%s)%s",
			l.Window, l.Retries, l.Allowed, l.Requests, liveProcesses(l.Processes), probationText(l))
	}
}

// probationText says how long the pool still grants nothing, if it is in a
// probation.
func probationText(l fleet.Level) string {
	if l.Probation.IsZero() {
		return ""
	}
	return fmt.Sprintf("; probation: no grants for %v more (a state new, built again or from another server)", l.Probation.Sub(l.ServerTime).Round(time.Millisecond))
}

// liveProcesses says "1 live process" or "N live processes".
func liveProcesses(n int) string {
	if n == 1 {
		return "1 live process"
	}
	return fmt.Sprintf("%d live processes", n)
}
