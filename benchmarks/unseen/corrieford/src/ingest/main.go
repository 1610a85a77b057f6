package ingest

import (
	"context"
	"net/http"
	"time"
)

// Run polls every gauge once per interval until the context ends.
func Run(ctx context.Context, gauges []*Gauge, store *Store) error {
	client := &http.Client{Timeout: 10 * time.Second}
	ticker := time.NewTicker(PollIntervalSeconds * time.Second)
	defer ticker.Stop()
	for {
		for _, g := range gauges {
			if r, err := g.Poll(ctx, client); err == nil {
				_ = store.Save(ctx, r)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}
