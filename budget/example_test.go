package budget_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/budget"
)

// Build the budget of a real client from its preset, or from a Spec read
// from a configuration file.
func ExamplePreset() {
	spec, err := budget.Preset("aws-2026")
	if err != nil {
		panic(err)
	}
	b, err := spec.New()
	if err != nil {
		panic(err)
	}
	tb := b.(*budget.TokenBucket)
	fmt.Printf("%T with %g of %g tokens\n", b, tb.Level(), tb.Capacity())

	// Zero fields take their defaults; invalid ones are named.
	_, err = budget.Spec{Kind: budget.KindTokenRatio, MaxTokens: 2000}.New()
	fmt.Println(err)
	fmt.Println(errors.Is(err, budget.ErrInvalidSpec))
	// Output:
	// *budget.TokenBucket with 500 of 500 tokens
	// budget: invalid spec: max_tokens must be in (0, 1000] with at most 3 decimal places, got 2000
	// true
}

// The protocol: BeginAt before the first attempt, EndAt after every attempt,
// RetryAt before every retry, with the ticket it returns passed to that
// retry's EndAt.
func Example_protocol() {
	spec, _ := budget.Preset("aws-2026")
	b, _ := spec.New()
	level := b.(*budget.TokenBucket).Level
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

	// call makes one request of at most 3 attempts; results says which
	// attempts succeed.
	call := func(results ...bool) {
		b.BeginAt(now)
		var t budget.Ticket // the zero Ticket: a first attempt
		for i, ok := range results {
			if ok {
				b.EndAt(now, budget.Success, t)
				fmt.Printf("  attempt %d succeeded; %g tokens\n", i+1, level())
				return
			}
			b.EndAt(now, budget.Failure, t)
			if i+1 == 3 {
				break
			}
			var granted bool
			if t, granted = b.RetryAt(now, budget.Transient); !granted {
				fmt.Printf("  attempt %d failed; retry refused\n", i+1)
				return
			}
			fmt.Printf("  attempt %d failed; retry granted, %g tokens\n", i+1, level())
		}
		fmt.Printf("  gave up; %g tokens\n", level())
	}

	fmt.Println("first try fails, retry succeeds (refunded):")
	call(false, true)
	fmt.Println("every attempt fails (both retries are paid for):")
	call(false, false, false)
	// Output:
	// first try fails, retry succeeds (refunded):
	//   attempt 1 failed; retry granted, 486 tokens
	//   attempt 2 succeeded; 500 tokens
	// every attempt fails (both retries are paid for):
	//   attempt 1 failed; retry granted, 486 tokens
	//   attempt 2 failed; retry granted, 472 tokens
	//   gave up; 472 tokens
}

// gRPC retry throttling: failures spend a token, successes earn a tenth of
// one, and retries stop at half of maxTokens.
func ExampleTokenRatio() {
	r := budget.NewTokenRatio(10, 0.1)
	now := time.Time{}
	for range 5 {
		r.EndAt(now, budget.Failure, budget.Ticket{})
	}
	_, ok := r.RetryAt(now, budget.Transient)
	fmt.Println(r.Level(), ok)
	r.EndAt(now, budget.Success, budget.Ticket{})
	_, ok = r.RetryAt(now, budget.Transient)
	fmt.Println(r.Level(), ok)
	// Output:
	// 5 false
	// 5.1 true
}

// The SRE book's budget: retries at most 10 % of the requests of the last
// 10 seconds.
func ExampleWindow() {
	w := budget.NewWindow(10*time.Second, 0.1, 0)
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for range 20 {
		w.BeginAt(now)
	}
	granted := 0
	for range 5 {
		if _, ok := w.RetryAt(now, budget.Transient); ok {
			granted++
		}
	}
	fmt.Println("granted", granted, "of 5 after 20 requests")
	// Ten seconds later those requests have left the window.
	_, ok := w.RetryAt(now.Add(10*time.Second), budget.Transient)
	fmt.Println("10 s later:", ok)
	// Output:
	// granted 2 of 5 after 20 requests
	// 10 s later: false
}
