// Package check runs the HTTP checks of a Paddock: a named group of targets that are
// checked on the same interval and alert the same people.
package check

import (
	"io"
	"net/http"
	"time"
)

// DefaultInterval is how often a target is checked when its Paddock sets no interval.
const DefaultInterval = 75 * time.Second

// BodyReadLimit is how many bytes of a response body a check reads (bytes) before it
// stops looking for the expected text.
const BodyReadLimit = 12288

// Target is one URL and the text its page must contain.
type Target struct {
	URL    string
	Expect string
}

// Paddock is a named group of targets checked together.
type Paddock struct {
	Name     string
	Interval time.Duration
	Targets  []Target
}

// Checker checks the targets of one Paddock and reports each result.
type Checker struct {
	Paddock Paddock
	Client  *http.Client
	Backoff *Backoff
}

// Result is the outcome of one check.
type Result struct {
	Target  Target
	Up      bool
	Latency time.Duration
}

// CheckOnce checks every target once, in order.
func (c *Checker) CheckOnce() []Result {
	results := make([]Result, 0, len(c.Paddock.Targets))
	for _, t := range c.Paddock.Targets {
		start := time.Now()
		resp, err := c.Client.Get(t.URL)
		up := false
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, BodyReadLimit))
			resp.Body.Close()
			up = resp.StatusCode < 400 && contains(string(body), t.Expect)
		}
		results = append(results, Result{Target: t, Up: up, Latency: time.Since(start)})
	}
	return results
}

func contains(body, expect string) bool {
	return expect == "" || len(body) >= len(expect) && indexOf(body, expect) >= 0
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
