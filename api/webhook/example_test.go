package webhook_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hongbao-dev/hongbao/api/webhook"
)

// A receiver: check the signature on the raw body, drop an event already
// seen (delivery is at least once), answer 2xx quickly.
func ExampleVerify() {
	secret := []byte("the configuration's webhooks.secret")
	var mu sync.Mutex
	seen := map[string]bool{} // a real receiver keeps this in its database
	http.HandleFunc("POST /hooks/hongbao", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, r.Header.Get(webhook.Header), body, time.Now(), 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var e webhook.Event
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		first := !seen[e.ID]
		seen[e.ID] = true
		mu.Unlock()
		if first {
			_ = e.Type // handle e.Type and e.Data here (or queue them)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
