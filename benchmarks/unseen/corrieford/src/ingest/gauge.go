// Package ingest polls the river gauges and stores their readings.
package ingest

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

const (
	// How often each gauge is polled, in seconds.
	PollIntervalSeconds = 75
	// A river stage above this many millimetres raises a flood warning.
	FloodStageMM = 3180
	// How many readings the in-memory ring keeps for each gauge.
	RingSize = 640
)

// Reading is one measurement of the river stage at a gauge.
type Reading struct {
	Gauge   string
	StageMM int
	Taken   time.Time
}

// Gauge is one radar level sensor reached over HTTP.
type Gauge struct {
	Name    string
	Address string
	ring    []Reading
}

// Poll asks the gauge for its current stage and remembers the reading.
func (g *Gauge) Poll(ctx context.Context, client *http.Client) (Reading, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.Address+"/stage", nil)
	if err != nil {
		return Reading{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Reading{}, err
	}
	defer resp.Body.Close()
	var body struct{ StageMM int `json:"stage_mm"` }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return Reading{}, err
	}
	r := Reading{Gauge: g.Name, StageMM: body.StageMM, Taken: time.Now()}
	g.ring = append(g.ring, r)
	if len(g.ring) > RingSize {
		g.ring = g.ring[1:]
	}
	return r, nil
}

// Flooding reports whether the reading is above the flood stage.
func Flooding(r Reading) bool {
	return r.StageMM > FloodStageMM
}
