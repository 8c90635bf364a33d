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
         them (the processes also hold what they were granted and have not
         spent yet)
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
  --addr A[,A…]        Redis address HOST:PORT ($STORMGUARD_REDIS_ADDR, else
                       127.0.0.1:6379); a cluster's nodes, or the sentinels
  --deployment D       single, cluster or sentinel
                       ($STORMGUARD_REDIS_DEPLOYMENT, else single)
  --master NAME        sentinel: the master's name ($STORMGUARD_REDIS_MASTER)
  --user NAME          Redis ACL user ($STORMGUARD_REDIS_USER, else none)
  --password-file F    read the Redis password from the file F (its first
                       line); else $STORMGUARD_REDIS_PASSWORD_FILE, else
                       $STORMGUARD_REDIS_PASSWORD, else none. A password is
                       never taken from the command line: every user of the
                       machine sees it in the process list.
  --tls                use TLS, trusting the system's roots
                       ($STORMGUARD_REDIS_TLS=1)
  --tls-ca F           PEM file of the CA of the server's certificate
                       (implies --tls; $STORMGUARD_REDIS_TLS_CA)
  --tls-cert F         PEM files of a client certificate and its key, for a
  --tls-key F          server with tls-auth-clients ($STORMGUARD_REDIS_TLS_CERT,
                       $STORMGUARD_REDIS_TLS_KEY)
  --tls-server-name N  the name the server's certificate must hold
                       ($STORMGUARD_REDIS_TLS_SERVER_NAME)
  --timeout D          give up on Redis after D, in [1ms, 1m] (default 2s)
  Sentinels that require a password read it from
  $STORMGUARD_REDIS_SENTINEL_PASSWORD(_FILE) and $STORMGUARD_REDIS_SENTINEL_USER.

Keep a password file out of repositories and readable by its owner only
(a warning says so if others can read it).

Exit status: 0 success, 1 error (Redis unreachable or refusing),
2 usage error or bad input (an unreadable --password-file).
`

// fleetFlags are the flags shared by the fleet commands.
type fleetFlags struct {
	addr, deployment, master, user, passwordFile string
	tls                                          bool
	tlsCA, tlsCert, tlsKey, tlsServerName        string
	password                                     string // refused: see connection
	timeout                                      time.Duration
	budget, dials                                string
	json                                         bool
}

func (f *fleetFlags) set(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "", "Redis `HOST:PORT`[,…]")
	fs.StringVar(&f.deployment, "deployment", "", "single, cluster or sentinel")
	fs.StringVar(&f.master, "master", "", "sentinel: the master's `NAME`")
	fs.StringVar(&f.user, "user", "", "Redis ACL user")
	fs.StringVar(&f.passwordFile, "password-file", "", "read the Redis password from `FILE`")
	fs.StringVar(&f.password, "password", "", "not accepted (use --password-file or the environment)")
	fs.BoolVar(&f.tls, "tls", false, "use TLS")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM `FILE` of the server certificate's CA")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM `FILE` of a client certificate")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM `FILE` of the client certificate's key")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "the `NAME` the server's certificate must hold")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Second, "give up on Redis after `D`")
	fs.StringVar(&f.budget, "budget", "default", "the shared budget `NAME`")
	fs.StringVar(&f.dials, "dials", "default", "the dials `NAME`")
	fs.BoolVar(&f.json, "json", false, "print JSON")
}

// connection reads the connection from the environment, the flags given
// winning, and writes warnings to stderr (a password file others can
// read). A bad file or setting is bad input.
func (f *fleetFlags) connection(stderr io.Writer) (fleet.Connection, error) {
	over := map[string]string{
		fleet.EnvAddr: f.addr, fleet.EnvDeployment: f.deployment, fleet.EnvMaster: f.master, fleet.EnvUser: f.user,
		fleet.EnvTLSCA: f.tlsCA, fleet.EnvTLSCert: f.tlsCert, fleet.EnvTLSKey: f.tlsKey, fleet.EnvTLSServerName: f.tlsServerName,
	}
	if f.tls {
		over[fleet.EnvTLS] = "1"
	}
	if f.passwordFile != "" {
		// The flag wins over both variables.
		over[fleet.EnvPasswordFile] = f.passwordFile
		over[fleet.EnvPassword] = "\x00unset"
	}
	getenv := func(k string) string {
		if v := over[k]; v == "\x00unset" {
			return ""
		} else if v != "" {
			return v
		}
		return os.Getenv(k)
	}
	if pf := getenv(fleet.EnvPasswordFile); pf != "" {
		if st, err := os.Stat(pf); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(stderr, "stormguard fleet: warning: the password file %s can be read by other users (mode %v); chmod 600 it\n", pf, st.Mode().Perm())
		}
	}
	c, err := fleet.ConnectionFromEnv(getenv)
	if err != nil {
		return c, badInput(fmt.Errorf("fleet: %s", strings.ReplaceAll(err.Error(), "\n", "; ")))
	}
	c.Timeout = f.timeout
	c.PoolSize = 1
	return c, nil
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
	case f.timeout < time.Millisecond || f.timeout > time.Minute:
		return usageError{fmt.Sprintf("fleet %s: --timeout must be in [1ms, 1m], got %v", sub, f.timeout)}
	case f.password != "":
		return usageError{fmt.Sprintf("fleet %s: --password is not accepted: a password on the command line shows in the process list to every user of the machine; use --password-file or STORMGUARD_REDIS_PASSWORD", sub)}
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

	conn, err := f.connection(stderr)
	if err != nil {
		return err
	}
	rdb, err := conn.Client()
	if err != nil {
		return badInput(err)
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	addr := strings.Join(conn.Addrs, ",")
	if conn.Deployment != "" && conn.Deployment != fleet.Single {
		addr += " (" + string(conn.Deployment) + ")"
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			if msg := err.Error(); strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS") {
				return fmt.Errorf("refused by Redis at %s, which requires authentication: %w (give the password with --password-file, STORMGUARD_REDIS_PASSWORD_FILE or STORMGUARD_REDIS_PASSWORD)", addr, err)
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
		return fmt.Sprintf("token bucket, %g of %g tokens in the pool (%s, %d waiting for tokens)",
			l.Pool, l.Capacity, liveProcesses(l.Processes), l.Waiting)
	default:
		return fmt.Sprintf("window of %v, %g retries of %g allowed, %d requests (%s, %d waiting for retries)",
			l.Window, l.Retries, l.Allowed, l.Requests, liveProcesses(l.Processes), l.Waiting)
	}
}

// liveProcesses says "1 live process" or "N live processes".
func liveProcesses(n int) string {
	if n == 1 {
		return "1 live process"
	}
	return fmt.Sprintf("%d live processes", n)
}
