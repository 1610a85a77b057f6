// Package notify tells people when a target goes down or comes back.
package notify

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Flare is one alert: which target, and whether it is down or back up.
type Flare struct {
	Paddock string `json:"paddock"`
	URL     string `json:"url"`
	Up      bool   `json:"up"`
}

// SendFlare posts an alert to the chat webhook as JSON.
func SendFlare(webhook string, f Flare) error {
	payload, err := json.Marshal(f)
	if err != nil {
		return err
	}
	resp, err := http.Post(webhook, "application/json", bytes.NewReader(payload))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
