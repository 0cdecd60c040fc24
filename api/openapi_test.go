package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// internalCodes are in the status table but never reach a client: the
// router retries wrong_set (after refreshing the topology) and
// duplicate_id (with a new ID); invalid_user is a server's answer to a
// router-signed user header the router never sends malformed; an open
// already made is answered 200 already_opened, not the problem
// already_opened; client_closed is logged for a client that left before
// its answer, which nobody reads; malformed_batch and batch_too_large
// refuse a router's batch (router -> server only), never a client's request.
var internalCodes = []string{"wrong_set", "duplicate_id", "invalid_user", "already_opened", "client_closed", "malformed_batch", "batch_too_large"}

func TestOpenAPIIsValidJSON31(t *testing.T) {
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(OpenAPI()), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || len(doc.Paths) == 0 {
		t.Fatalf("openapi %q with %d paths, want 3.1.0 with paths", doc.OpenAPI, len(doc.Paths))
	}
}

// Every code of the status table is documented with exactly its status on
// some operation, and every documented code has the status the table
// gives it (codes not in the table are InvalidError codes: 400).
func TestOpenAPICodesMatchStatusTable(t *testing.T) {
	spec, err := ParseSpec()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for op, statuses := range spec.Ops {
		for status, codes := range statuses {
			for _, code := range codes {
				documented[code] = true
				want, known := statusOf[code]
				if !known {
					want = Status(&hongbao.InvalidError{Code: code})
				}
				if status != want {
					t.Errorf("%s: openapi.json documents code %q as %d, the handlers answer it %d", op, code, status, want)
				}
			}
		}
	}
	for _, code := range append(spec.Unmatched, spec.Unparsed...) {
		documented[code] = true
	}
	for code, status := range statusOf {
		if !documented[code] && !slices.Contains(internalCodes, code) {
			t.Errorf("code %q (%d) is answered by the handlers but documented on no operation of openapi.json", code, status)
		}
	}
	if !slices.Equal(spec.Unmatched, []string{"not_found", "method_not_allowed"}) || statusOf["not_found"] != http.StatusNotFound ||
		statusOf["method_not_allowed"] != http.StatusMethodNotAllowed {
		t.Errorf("unmatched requests: openapi.json says %v, the handlers answer not_found 404 and method_not_allowed 405", spec.Unmatched)
	}
}

func TestSpecCheck(t *testing.T) {
	spec, err := ParseSpec()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path string
		status       int
		code         string
		ok           bool
	}{
		{"POST", "/v1/packets/123/open", 200, "", true},
		{"POST", "/v1/packets/123/open", 409, "sold_out", true},
		{"POST", "/v1/packets/123/open", 409, "already_opened", false},
		{"POST", "/v1/packets/123/open", 402, "insufficient_funds", false},
		{"POST", "/v1/packets/123/open", 403, "not_in_audience", true},
		{"POST", "/v1/packets/123/open", 403, "daily_limit", true},
		{"POST", "/v1/packets/123/grab", 403, "not_in_audience", false}, // grab answers 200 with the reason
		{"POST", "/v1/packets", 403, "daily_limit", true},
		{"POST", "/v1/packets", 400, "count_over_audience", true},
		{"POST", "/v1/packets", 400, "duplicate_audience_user", true},
		{"POST", "/v1/packets", 201, "", true},
		{"POST", "/v1/packets", 400, "invalid_total", true},
		{"POST", "/v1/packets", 400, "", false},
		{"GET", "/v1/packets/7", 404, "not_found", true},
		{"GET", "/nope", 404, "not_found", true},
		{"GET", "/nope", 200, "", false},
		{"DELETE", "/v1/packets/7", 404, "not_found", true},
		{"DELETE", "/v1/packets/7", 405, "method_not_allowed", true},
		{"DELETE", "/v1/packets/7", 404, "method_not_allowed", false},
		{"DELETE", "/v1/packets/7", 405, "not_found", false},
	}
	for _, tt := range tests {
		if err := spec.Check(tt.method, tt.path, tt.status, tt.code); (err == nil) != tt.ok {
			t.Errorf("Check(%s %s %d %q) = %v, want ok=%v", tt.method, tt.path, tt.status, tt.code, err, tt.ok)
		}
	}
}

// TestOpenAPIAudienceLimitIsTheDefault: the audience's maxItems is the
// default of limits.max_audience, and its description says the configured
// limit is what a cluster enforces (a JSON Schema cannot name a setting).
func TestOpenAPIAudienceLimitIsTheDefault(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				AudienceRequest struct {
					Properties struct {
						Users struct {
							MaxItems    int    `json:"maxItems"`
							Description string `json:"description"`
						} `json:"users"`
					} `json:"properties"`
				} `json:"AudienceRequest"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(OpenAPI()), &doc); err != nil {
		t.Fatal(err)
	}
	u := doc.Components.Schemas.AudienceRequest.Properties.Users
	if u.MaxItems != hongbao.DefaultMaxAudience || !strings.Contains(u.Description, "limits.max_audience") || !strings.Contains(u.Description, "default") {
		t.Fatalf("audience users: maxItems %d (%q), want the default %d of limits.max_audience, said so", u.MaxItems, u.Description, hongbao.DefaultMaxAudience)
	}
}
