package check

import "time"

// MaxBackoff is the longest a failing target waits between two checks.
const MaxBackoff = 37 * time.Minute

// Backoff doubles the wait after each failure, up to MaxBackoff, and resets on success.
type Backoff struct {
	current time.Duration
}

// Next returns the wait before the next check of a target that just failed.
func (b *Backoff) Next(interval time.Duration) time.Duration {
	if b.current == 0 {
		b.current = interval
	} else {
		b.current *= 2
	}
	if b.current > MaxBackoff {
		b.current = MaxBackoff
	}
	return b.current
}

// Reset forgets the failures after a check succeeds.
func (b *Backoff) Reset() {
	b.current = 0
}
