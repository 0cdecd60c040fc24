package api_test

import (
	"errors"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// TestQuery: a well-formed query string parses; a malformed one or a
// parameter given twice is 400 invalid_query, naming the parameter when
// one is to blame.
func TestQuery(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		want  map[string]string // nil: refused
		field string
	}{
		{"", map[string]string{}, ""},
		{"limit=5&cursor=9", map[string]string{"limit": "5", "cursor": "9"}, ""},
		{"month=2026-11", map[string]string{"month": "2026-11"}, ""},
		{"limit=%35", map[string]string{"limit": "5"}, ""},
		{"limit=", map[string]string{"limit": ""}, ""},
		{"limit=%zz", nil, "query"},
		{"limit=1;cursor=2", nil, "query"},
		{"month=%", nil, "query"},
		{"limit=1&limit=2", nil, "limit"},
		{"cursor=1&limit=2&cursor=1", nil, "cursor"},
	} {
		q, err := api.Query(tc.raw)
		if tc.want == nil {
			var inv *hongbao.InvalidError
			if !errors.As(err, &inv) || inv.Code != "invalid_query" || inv.Field != tc.field {
				t.Errorf("Query(%q) = %v, %v; want invalid_query on %q", tc.raw, q, err, tc.field)
			}
			continue
		}
		if err != nil || len(q) != len(tc.want) {
			t.Errorf("Query(%q) = %v, %v; want %v", tc.raw, q, err, tc.want)
			continue
		}
		for k, v := range tc.want {
			if q.Get(k) != v {
				t.Errorf("Query(%q)[%s] = %q, want %q", tc.raw, k, q.Get(k), v)
			}
		}
	}
}
