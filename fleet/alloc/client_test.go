package alloc

import (
	"math"
	"testing"
)

const ms = int64(1e6) // ns

// newTestClient is a process of the stormguard preset's budget (capacity
// 100, a retry 10): lease 20, lease TTL 2 s, heartbeat 10 s, horizon 200 ms.
func newTestClient(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{ID: "p", Kind: Bucket, Capacity: 100_000, MaxCost: 10_000, Lease: 20_000,
		LeaseTTL: 2000 * ms, Heartbeat: 10_000 * ms, Horizon: 200 * ms, Retry: 5 * ms, Expire: 15_000 * ms,
		CreditNum: 1, CreditDen: 1, Rate: 1000, MinFlush: 10 * ms})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientIdleSendsOnlyHeartbeats(t *testing.T) {
	c := newTestClient(t)
	c.Message(0, 0, 0, Counts{}) // the join
	c.Apply(0, Answer{Gen: "g", Ver: 1, Avail: 100_000, Live: 5})
	// Earnings while the pool was full: not worth a round trip.
	for _, now := range []int64{1000 * ms, 5000 * ms, 9999 * ms} {
		if a := c.Decide(now, Counts{Credit: 50_000}); a.Send || a.Wake != 10_000*ms {
			t.Fatalf("at %dms: %+v; want no send, a wake at the heartbeat", now/ms, a)
		}
	}
	if a := c.Decide(10_000*ms, Counts{Credit: 50_000}); !a.Send {
		t.Fatalf("at the heartbeat: %+v", a)
	}
	m, _ := c.Message(10_000*ms, 50_000, 0, Counts{})
	if m.Need != 0 || m.Credit != 50_000 || m.Span != 10_000 || m.Room != 0 || m.Known != "g" || m.Seen != 1 || m.Seq != 2 {
		t.Errorf("heartbeat message %+v", m)
	}
}

func TestClientAsksWhenARetryWaits(t *testing.T) {
	c := newTestClient(t)
	c.Message(0, 0, 0, Counts{})
	c.Apply(0, Answer{Gen: "g", Ver: 1, Avail: 100_000})
	k := Counts{Waiting: 10_000, Asked: 10_000}
	if a := c.Decide(ms, k); !a.Send {
		t.Fatalf("a retry waits: %+v", a)
	}
	// One retry asked now and then: no lease beyond the need.
	m, _ := c.Message(ms, 0, 0, k)
	if m.Need != 10_000 || m.Want != 10_000 {
		t.Errorf("need %d, want %d; want one retry's price", m.Need, m.Want)
	}
	// Told to wait: a retry that waits does not send until then.
	if g := c.Apply(2*ms, Answer{Gen: "g", Ver: 2, Next: 50_000}); g != 0 {
		t.Fatalf("grant %d", g)
	}
	if !c.BackingOff(3*ms) || c.BackoffUntil() != 52*ms {
		t.Errorf("backing off %t until %d", c.BackingOff(3*ms), c.BackoffUntil())
	}
	if a := c.Decide(3*ms, k); a.Send || a.Wake != 52*ms {
		t.Errorf("during the back-off: %+v", a)
	}
	if a := c.Decide(52*ms, k); !a.Send {
		t.Errorf("after the back-off: %+v", a)
	}
}

func TestClientBusyLeases(t *testing.T) {
	c := newTestClient(t)
	c.Message(0, 0, 0, Counts{})
	c.Apply(0, Answer{Gen: "g", Ver: 1, Avail: 100_000})
	// Five retries asked within a few milliseconds: it expects more.
	k := Counts{Asked: 50_000, Waiting: 10_000}
	c.Decide(5*ms, k)
	m, _ := c.Message(5*ms, 0, 0, k)
	if m.Need != 10_000 || m.Want != 30_000 {
		t.Errorf("busy: need %d, want %d; want one retry and the lease of 20 beyond", m.Need, m.Want)
	}
	c.Apply(6*ms, Answer{Gen: "g", Ver: 2, Grant: 30_000, Avail: 70_000})
	// Holding 20 after paying the waiting retry: it looks again below 10.
	a := c.Decide(7*ms, Counts{Asked: 50_000, Hold: 20_000})
	if a.Send || a.LowWater != 10_000 {
		t.Errorf("holding its lease: %+v; want no send, low water 10", a)
	}
	if a := c.Decide(8*ms, Counts{Asked: 60_000, Hold: 9_000}); !a.Send {
		t.Errorf("below the low water: %+v", a)
	}
	m, _ = c.Message(8*ms, 0, 0, Counts{Asked: 60_000, Hold: 9_000})
	if m.Need != 10_000 || m.Want != 11_000 {
		t.Errorf("refill ahead: need %d, want %d; want 10, 11 (the lease less what it holds)", m.Need, m.Want)
	}
	// Unspent for LeaseTTL: given back.
	c.Apply(9*ms, Answer{Gen: "g", Ver: 3, Grant: 11_000, Avail: 59_000})
	if a := c.Decide(9*ms+2000*ms, Counts{Asked: 60_000, Hold: 20_000}); !a.Expire {
		t.Errorf("a lease unspent for its TTL: %+v", a)
	}
}

func TestClientFlushesWhileProcessesWait(t *testing.T) {
	c := newTestClient(t)
	c.Message(0, 0, 0, Counts{})
	// 500 processes live, some waiting: send earnings every 500/1000 s.
	c.Apply(0, Answer{Gen: "g", Ver: 1, Avail: 80_000, Live: 500, Waiting: 3})
	a := c.Decide(100*ms, Counts{Credit: 2_000})
	if a.Send || a.Wake != 500*ms {
		t.Fatalf("before the flush is due: %+v", a)
	}
	if a := c.Decide(500*ms, Counts{Credit: 2_000}); !a.Send {
		t.Fatalf("when due: %+v", a)
	}
	// Nobody waits any more: back to the heartbeat.
	c.Message(500*ms, 2_000, 0, Counts{})
	c.Apply(501*ms, Answer{Gen: "g", Ver: 2, Avail: 90_000, Live: 500})
	if a := c.Decide(1500*ms, Counts{Credit: 2_000}); a.Send || a.Wake != 10_500*ms {
		t.Errorf("nobody waits: %+v", a)
	}
	// A low pool: earnings worth a retry are sent at once.
	c.Message(1500*ms, 0, 0, Counts{})
	c.Apply(1501*ms, Answer{Gen: "g", Ver: 3, Avail: 10_000, Live: 500})
	if a := c.Decide(1600*ms, Counts{Credit: 9_000}); a.Send || a.FlushAt != 10_000 {
		t.Errorf("less than a retry earned: %+v", a)
	}
	if a := c.Decide(1700*ms, Counts{Credit: 9_000, Back: 1_000}); !a.Send {
		t.Errorf("a retry's worth earned and given back: %+v", a)
	}
}

func TestClientPendingAndExpire(t *testing.T) {
	c := newTestClient(t)
	m1, _ := c.Message(0, 7_000, 3_000, Counts{})
	c.Failed(ms)
	if a := c.Decide(2*ms, Counts{}); a.Send || a.Wake != 6*ms {
		t.Errorf("after a failed round trip: %+v", a)
	}
	// Sent again unchanged, whatever the counts say now.
	m2, _ := c.Message(6*ms, 99_000, 99_000, Counts{Waiting: 10_000})
	if m2 != m1 {
		t.Errorf("resent %+v, want %+v", m2, m1)
	}
	// Unanswered for Expire: dropped, its credit lost, a new one built.
	m3, dropped := c.Message(15_001*ms, 1_000, 0, Counts{})
	if dropped != 10_000 || m3.Seq != m1.Seq+1 || m3.Credit != 1_000 {
		t.Errorf("after Expire: %+v, dropped %d", m3, dropped)
	}
}

func TestClientConfigErrors(t *testing.T) {
	good := ClientConfig{ID: "p", Kind: Bucket, MaxCost: 1, LeaseTTL: 1, Heartbeat: 1, Retry: 1, Expire: 1, CreditDen: 1, Rate: 1}
	if _, err := NewClient(good); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(*ClientConfig){
		func(c *ClientConfig) { c.ID = "" },
		func(c *ClientConfig) { c.Kind = 0 },
		func(c *ClientConfig) { c.MaxCost = 0 },
		func(c *ClientConfig) { c.LeaseTTL = 0 },
		func(c *ClientConfig) { c.CreditDen = 0 },
		func(c *ClientConfig) { c.Rate = 0 },
	} {
		c := good
		f(&c)
		if _, err := NewClient(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (Params{}).Validate(); err == nil {
		t.Error("empty params accepted")
	}
	if a := (&Client{cfg: good}).Decide(0, Counts{}); a.LowWater != math.MinInt64 {
		t.Errorf("%+v", a)
	}
}
