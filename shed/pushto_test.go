package shed

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stormguard/stormguard/wire"
)

// TestPushToAsPushAt: PushTo gives the Admission PushAt gives, leaves the
// caller's item as it was, and overwrites whatever the Admission held
// before, over random pushes and pops on small queues of every order and
// priority (evictions, refusals, expired newcomers and due victims).
func TestPushToAsPushAt(t *testing.T) {
	for _, c := range []Config{
		{Capacity: 3},
		{Capacity: 3, Order: LIFO},
		{Capacity: 4, Order: AdaptiveLIFO, MinRemaining: 2 * time.Millisecond},
		{Capacity: 2, Priority: ByCriticality, MinRemaining: time.Millisecond},
		{Capacity: 3, Priority: NoPriority},
	} {
		t.Run(fmt.Sprintf("%s/%s/%d", c.Order, c.Priority, c.Capacity), func(t *testing.T) {
			at, to := mustNew[string](t, c), mustNew[string](t, c)
			rng := rand.New(rand.NewPCG(7, 11))
			var a Admission[string] // reused: PushTo must clear what it held
			now, pushes, victims := 0.0, 0, 0
			for step := range 2000 {
				now += rng.Float64() * 3
				if rng.IntN(3) == 0 {
					gi, gw, gok := to.PopAt(ms(now))
					wi, ww, wok := at.PopAt(ms(now))
					if gi != wi || gw != ww || gok != wok {
						t.Fatalf("step %d: pop (%v %v %v); want (%v %v %v)", step, gi, gw, gok, wi, ww, wok)
					}
					continue
				}
				it := Item[string]{Payload: fmt.Sprint(step), Attempt: 1 + rng.IntN(3), Criticality: wire.Criticality(rng.IntN(4))}
				if rng.IntN(2) == 0 {
					it.Deadline = ms(now + rng.Float64()*10)
				}
				in := it
				want := at.PushAt(ms(now), it)
				to.PushTo(ms(now), &it, &a)
				if it != in {
					t.Fatalf("step %d: PushTo changed the item to %+v", step, it)
				}
				if !reflect.DeepEqual(a, want) {
					t.Fatalf("step %d: PushTo gave %+v; want %+v", step, a, want)
				}
				pushes++
				if want.HasVictim() {
					victims++
				}
			}
			if victims == 0 {
				t.Errorf("%d pushes gave no victim: the test did not reach a full queue", pushes)
			}
		})
	}
}
