package budget

// NeedsClock reports whether a budget reads the time it is given. Shells
// skip the clock (about 65 ns on a kvm-clock VM, more than the rest of the
// success path) for budgets that answer false.
func (Unlimited) NeedsClock() bool { return false }

// NeedsClock reports false: the token bucket counts tokens, not time.
func (*TokenBucket) NeedsClock() bool { return false }

// NeedsClock reports false: the token ratio counts tokens, not time.
func (*TokenRatio) NeedsClock() bool { return false }

// NeedsClock reports false: the concurrency share counts attempts in flight.
func (*Concurrency) NeedsClock() bool { return false }

// NeedsClock reports true: the window buckets events by time.
func (*Window) NeedsClock() bool { return true }
