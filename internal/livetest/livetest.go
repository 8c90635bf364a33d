// Package livetest holds what the tests of live policy files share, for
// net/http (policyfile) and gRPC (policyfile/grpcpolicy) alike: a file
// replaced as a deploy tool replaces it, and reloads between versions while
// goroutines make calls.
package livetest

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/policyfile"
)

// WriteFile replaces the file at path with data as a deploy tool does: a
// new file renamed over the old one.
func WriteFile(t testing.TB, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// UnderLoad reloads l between versions (written to path in turn, the
// second first, then a reload about every millisecond) while workers
// goroutines each call call(w, i) for i from 0 to perWorker−1, and returns
// once they are all done, with the number of versions applied meanwhile.
func UnderLoad(t testing.TB, l *policyfile.Live, path string, versions []string, workers, perWorker int, call func(w, i int)) int {
	t.Helper()
	stop := make(chan struct{})
	reloaded := make(chan int)
	go func() { // the reloader
		n := 0
		for i := 1; ; i++ {
			select {
			case <-stop:
				reloaded <- n
				return
			default:
			}
			WriteFile(t, path, versions[i%len(versions)])
			if err := l.Reload(); err == nil {
				n++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				call(w, i)
			}
		}()
	}
	wg.Wait()
	close(stop)
	return <-reloaded
}

// All reports whether f holds for every element of xs.
func All[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}
