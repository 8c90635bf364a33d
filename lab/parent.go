package lab

import (
	"context"
	"errors"
	"os"
	"time"
)

// ErrGoRunGone is the cause of a [WatchGoRun] context once the go
// command that started this process has ended.
var ErrGoRunGone = errors.New("the go command that started the lab (go run) ended")

// parentPoll is how often WatchGoRun looks at its parent.
const parentPoll = 100 * time.Millisecond

// WatchGoRun returns a context derived from ctx that is also cancelled,
// with cause ErrGoRunGone, when this process was started by `go run` and
// that go command ends.
//
// `go run` starts the program it built as a child and waits for it. It
// ignores SIGINT and SIGQUIT (it counts on the terminal sending Ctrl-C to
// the whole foreground process group, the program included) and passes
// no signal on, so SIGKILL or SIGTERM to the go command alone would leave
// the lab running as an orphan, with its role processes and their ports,
// to the end of the run. With this context the orchestrator notices
// within parentPoll that its parent is gone (it has been reparented) and
// stops as on Ctrl-C: roles stopped, directory removed.
//
// Only the go command is watched (its executable is named go): a lab
// started from a shell keeps running when the shell ends, as under
// nohup. Outside Linux the parent is not recognised and the context is
// only ctx's.
func WatchGoRun(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := func() { cancel(context.Canceled) }
	ppid := os.Getppid()
	if !parentIsGo(ppid) {
		return ctx, stop
	}
	go func() {
		t := time.NewTicker(parentPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != ppid {
					cancel(ErrGoRunGone)
					return
				}
			}
		}
	}()
	return ctx, stop
}
