package broker

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestTierRestoreUnknownTopicIs404: restoring a topic the bucket does not
// hold is a missing resource (404 with the error), not a server fault.
func TestTierRestoreUnknownTopicIs404(t *testing.T) {
	n := startNode(t, t.TempDir(), tierSettings(nil))
	resp, err := http.Post("http://"+n.AdminAddr()+"/v1/tier/restore?topic=nosuch", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusNotFound || e.Error == "" {
		t.Fatalf("restore of a missing topic: %s %q, want 404 with an error", resp.Status, e.Error)
	}
}
