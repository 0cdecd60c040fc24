package webhooks_test

import (
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/set/webhooks"
	"github.com/hongbao-dev/hongbao/store"
)

// TestBodyGolden pins the exact JSON POSTed for each event type, from the
// data the store writes (store's TestEventsWrittenWithTheirChanges pins
// that data against its records).
func TestBodyGolden(t *testing.T) {
	at := time.Date(2026, 3, 15, 12, 0, 0, 123456789, time.FixedZone("Asia/Shanghai", 8*3600))
	for _, tc := range goldenData {
		got, err := webhooks.Body(store.Event{ID: tc.id, Type: tc.typ, Data: tc.data, CreatedAt: at.Truncate(time.Millisecond)})
		if err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.typ, got, err, tc.want)
		}
	}
	if _, err := webhooks.Body(store.Event{ID: "x", Data: `{"broken"`}); err == nil {
		t.Error("a body of broken data was built")
	}
}

// TestEndpoint pins the short name an endpoint has in delivered_to.
func TestEndpoint(t *testing.T) {
	if got := webhooks.Endpoint("https://hooks.example.com/hongbao"); len(got) != 12 || got == webhooks.Endpoint("https://hooks.example.com/other") {
		t.Fatalf("Endpoint = %q", got)
	}
}

// goldenData is, for each event type, the data the store writes and the
// exact body POSTed for it at 2026-03-15T04:00:00.123Z.
var goldenData = []struct {
	typ, id, data, want string
}{
	{store.EventSent, "packet.sent:291390042931703809",
		`{"packet":"291390042931703809","sender":"9","total":300,"count":3,"type":"fixed","expires_at":"2026-03-17T02:00:00.000Z"}`,
		`{"id":"packet.sent:291390042931703809","type":"packet.sent","created_at":"2026-03-15T04:00:00.123Z","data":{"packet":"291390042931703809","sender":"9","total":300,"count":3,"type":"fixed","expires_at":"2026-03-17T02:00:00.000Z"}}`},
	{store.EventOpened, "packet.opened:291390042931703809:42", `{"packet":"291390042931703809","user":"42","amount":100}`,
		`{"id":"packet.opened:291390042931703809:42","type":"packet.opened","created_at":"2026-03-15T04:00:00.123Z","data":{"packet":"291390042931703809","user":"42","amount":100}}`},
	{store.EventFinished, "packet.finished:291390042931703809", `{"packet":"291390042931703809","best":"42","best_amount":100,"duration_ms":1500}`,
		`{"id":"packet.finished:291390042931703809","type":"packet.finished","created_at":"2026-03-15T04:00:00.123Z","data":{"packet":"291390042931703809","best":"42","best_amount":100,"duration_ms":1500}}`},
	{store.EventExpired, "packet.expired:291390042931703809", `{"packet":"291390042931703809","sender":"9","refund":200}`,
		`{"id":"packet.expired:291390042931703809","type":"packet.expired","created_at":"2026-03-15T04:00:00.123Z","data":{"packet":"291390042931703809","sender":"9","refund":200}}`},
	{store.EventRefunded, "packet.refunded:291390042931703809", `{"packet":"291390042931703809","user":"9","amount":200}`,
		`{"id":"packet.refunded:291390042931703809","type":"packet.refunded","created_at":"2026-03-15T04:00:00.123Z","data":{"packet":"291390042931703809","user":"9","amount":200}}`},
}
