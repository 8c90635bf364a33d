package scenario

import (
	"testing"
	"time"
)

// TestMixtureValidate: a mixture validates with components of positive
// weight, which nest, and is refused without them or with fields of its
// own.
func TestMixtureValidate(t *testing.T) {
	d := Dist{Kind: "mixture", Of: []Component{
		{Weight: 3, Dist: Dist{Kind: "constant", Mean: time.Millisecond}},
		{Weight: 1, Dist: Dist{Kind: "mixture", Of: []Component{
			{Weight: 1, Dist: Dist{Kind: "constant", Mean: 100 * time.Millisecond}},
			{Weight: 1, Dist: Dist{Kind: "exponential", Mean: 300 * time.Millisecond}},
		}}},
	}}
	if err := d.validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Dist{
		{Kind: "mixture"},
		{Kind: "mixture", Of: []Component{{Weight: 0, Dist: Dist{Mean: 1}}}},
		{Kind: "mixture", Mean: 1, Of: []Component{{Weight: 1}}},
		{Kind: "constant", Of: []Component{{Weight: 1}}},
	} {
		if bad.validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
