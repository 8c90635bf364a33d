package engine

import "math"

// Exponential variates by the ziggurat method (Marsaglia and Tsang, 2000),
// with 256 layers of equal area v under f(x) = e^−x.
//
// The layer boundaries are r = x[1] > x[2] > … > x[255] > x[256] = 0 with
// x[i+1] = f⁻¹(f(x[i]) + v/x[i]), so layer i ≥ 1 is the rectangle of width
// x[i] between heights f(x[i]) and f(x[i+1]). Layer 0 is the base: the
// rectangle [0, r] × [0, f(r)] plus the tail beyond r, area v = (r+1)e^−r,
// given the pseudo-width x[0] = v/f(r). r is the value for which the top
// layer also has area v.
//
// A draw picks a layer i and a point x = u·x[i]. If x < x[i+1] it lies under
// the curve and is returned: that happens about 97.8 % of the time, for the
// cost of one 64-bit draw, a compare and a multiply. Otherwise the base layer
// samples the tail (r + an exponential, by memorylessness), and other layers
// test a uniform height against e^−x and start again on a miss.
const (
	expLayers = 256
	expR      = 7.69711747013104972
)

// expTab holds the ziggurat tables, built once by newExpTab.
type expTab struct {
	k [expLayers]uint64  // fast path: accept a 53-bit u if u < k[i] (k[i] = 2⁵³·x[i+1]/x[i])
	w [expLayers]float64 // x[i]·2⁻⁵³: a 53-bit u times w[i] is x
	f [expLayers + 1]float64
}

var expTable = newExpTab()

func newExpTab() *expTab {
	var t expTab
	var x [expLayers + 1]float64
	v := (expR + 1) * math.Exp(-expR)
	x[0] = v / math.Exp(-expR)
	x[1] = expR
	for i := 1; i < expLayers-1; i++ {
		x[i+1] = -math.Log(math.Exp(-x[i]) + v/x[i])
	}
	x[expLayers] = 0
	for i := range expLayers {
		t.k[i] = uint64(x[i+1] / x[i] * (1 << 53))
		t.w[i] = x[i] * 0x1p-53
	}
	for i := range expLayers + 1 {
		t.f[i] = math.Exp(-x[i])
	}
	return &t
}

// ExpFloat64 returns an exponentially distributed value with rate 1 (mean
// 1). Scale it for other means: a service time with mean m is
// m × ExpFloat64(). It uses a 256-layer ziggurat: usually one 64-bit draw,
// a compare and a multiply.
func (r *Rand) ExpFloat64() float64 {
	t := expTable
	for {
		// The low 8 bits pick the layer, the high 53 the point; bits 8–10
		// are unused, so the two are independent. u < 2⁵³ converts exactly
		// through int64, which is cheaper than converting a uint64.
		b := r.pcg.Uint64()
		i := b & (expLayers - 1)
		u := b >> 11
		x := float64(int64(u)) * t.w[i]
		if u < t.k[i] {
			return x
		}
		if i == 0 {
			return expR + r.expTail()
		}
		// Wedge: accept if a uniform height in layer i falls under e^−x.
		if t.f[i]+r.Float64()*(t.f[i+1]-t.f[i]) < math.Exp(-x) {
			return x
		}
	}
}

// expTail returns −ln(u) for u uniform on the multiples of 2⁻⁵³ in (0, 1]:
// an exponential variate the slow way, used beyond the ziggurat's base.
func (r *Rand) expTail() float64 {
	return -math.Log(float64(int64(r.pcg.Uint64()>>11+1)) * 0x1p-53)
}
