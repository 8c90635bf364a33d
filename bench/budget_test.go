package bench

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"

	"github.com/stormguard/stormguard/budget"
)

// A budget check is what a client does around each retry: ask for a retry,
// make it, report its success (which refunds or credits the budget).
//
//	stormguard  the aws-2026 token bucket: RetryAt + EndAt(Success)
//	aws         aws-sdk-go-v2's quota (ratelimit.TokenRateLimit): GetToken(14) + release
//	failsafe    failsafe-go's budget: TryAcquirePermit + ReleasePermit around
//	            RecordExecution + ReleaseExecution (what its executor calls)
//
// The other peers have no budget.

// fsBudget is the part of failsafe-go's budget its executor uses; the
// methods are exported on the unexported implementation.
type fsBudget interface {
	RecordExecution()
	ReleaseExecution()
	TryAcquirePermit() bool
	ReleasePermit()
}

type budgetLib struct {
	name  string
	check func() func() // returns one check, ready to run many times
}

var budgetLibs = []budgetLib{
	{"stormguard", func() func() {
		s, _ := budget.Preset("aws-2026")
		b, err := s.New()
		if err != nil {
			panic(err)
		}
		var now time.Time
		return func() {
			t, ok := b.RetryAt(now, budget.Transient)
			if !ok {
				panic("budget refused a retry")
			}
			b.EndAt(now, budget.Success, t)
		}
	}},
	{"aws", func() func() {
		q := ratelimit.NewTokenRateLimit(500)
		ctx := context.Background()
		return func() {
			release, err := q.GetToken(ctx, 14)
			if err != nil {
				panic(err)
			}
			_ = release()
		}
	}},
	{"failsafe", func() func() {
		b := fsbudget.NewBuilder().Build().(fsBudget)
		return func() {
			b.RecordExecution()
			if !b.TryAcquirePermit() {
				panic("budget refused a retry")
			}
			b.ReleasePermit()
			b.ReleaseExecution()
		}
	}},
}

func BenchmarkBudget(b *testing.B) {
	for _, l := range budgetLibs {
		b.Run(l.name, func(b *testing.B) {
			check := l.check()
			b.ReportAllocs()
			for b.Loop() {
				check()
			}
		})
	}
}

func BenchmarkBudgetParallel(b *testing.B) {
	for _, l := range budgetLibs {
		b.Run(l.name, func(b *testing.B) {
			check := l.check()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					check()
				}
			})
		})
	}
}
