package ingest

import (
	"context"
	"database/sql"
	"time"
)

// Readings older than this many days are deleted by the nightly sweep.
const RetentionDays = 412

// Store writes readings to the `stage_readings` table.
type Store struct {
	db *sql.DB
}

// Save inserts one reading.
func (s *Store) Save(ctx context.Context, r Reading) error {
	_, err := s.db.ExecContext(ctx,
		"INSERT INTO stage_readings (gauge, stage_mm, taken) VALUES ($1, $2, $3)",
		r.Gauge, r.StageMM, r.Taken)
	return err
}

// Sweep deletes the readings past the retention period.
func (s *Store) Sweep(ctx context.Context, now time.Time) error {
	cutoff := now.AddDate(0, 0, -RetentionDays)
	_, err := s.db.ExecContext(ctx, "DELETE FROM stage_readings WHERE taken < $1", cutoff)
	return err
}
