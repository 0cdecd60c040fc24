package webhooks_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/set/webhooks"
	"github.com/hongbao-dev/hongbao/store"
)

// openAPIDoc is the part of openapi.json the webhook checks read.
type openAPIDoc struct {
	Webhooks map[string]struct {
		Post struct {
			RequestBody struct {
				Content map[string]struct{ Schema map[string]any }
			} `json:"requestBody"`
			Parameters []map[string]any
		}
	}
	Components struct {
		Schemas    map[string]map[string]any
		Parameters map[string]map[string]any
	}
}

func readOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal([]byte(api.OpenAPI()), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOpenAPIWebhooksMatchPayloads: openapi.json documents a webhook for
// exactly the event types the store writes, each with the signature and
// event-ID headers, and the body the deliverer builds from the data the
// store writes (TestBodyGolden's, pinned by store's
// TestEventsWrittenWithTheirChanges) validates against its schema: every
// required field present, none undocumented, types, patterns and the
// type's const as the schema says. A body with a field missing or added
// fails.
func TestOpenAPIWebhooksMatchPayloads(t *testing.T) {
	doc := readOpenAPI(t)
	var documented []string
	for typ := range doc.Webhooks {
		documented = append(documented, typ)
	}
	slices.Sort(documented)
	emitted := slices.Sorted(slices.Values(store.EventTypes()))
	if !slices.Equal(documented, emitted) {
		t.Fatalf("openapi.json documents webhooks %v, the store writes %v", documented, emitted)
	}
	var golden []string
	for _, tc := range goldenData {
		golden = append(golden, tc.typ)
	}
	if !slices.Equal(golden, store.EventTypes()) {
		t.Fatalf("golden bodies of %v, the store writes %v", golden, store.EventTypes())
	}
	at := time.Date(2026, 3, 15, 4, 0, 0, 123e6, time.UTC)
	for _, tc := range goldenData {
		body, err := webhooks.Body(store.Event{ID: tc.id, Type: tc.typ, Data: tc.data, CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		wh := doc.Webhooks[tc.typ].Post
		schema := wh.RequestBody.Content["application/json"].Schema
		if err := validate(doc, schema, decode(t, body), "body"); err != nil {
			t.Errorf("%s: %s does not validate: %v", tc.typ, body, err)
		}
		var refs []string
		for _, p := range wh.Parameters {
			refs = append(refs, fmt.Sprint(p["$ref"]))
		}
		if want := []string{"#/components/parameters/HongbaoSignature", "#/components/parameters/HongbaoEventId"}; !slices.Equal(refs, want) {
			t.Errorf("%s: parameters %v, want %v", tc.typ, refs, want)
		}
		// The checker is not a yes-man: one field less or one more fails.
		for _, broken := range []string{strings.Replace(tc.data, `{"packet":"291390042931703809",`, `{`, 1), strings.Replace(tc.data, `{`, `{"extra":1,`, 1)} {
			b, _ := webhooks.Body(store.Event{ID: tc.id, Type: tc.typ, Data: broken, CreatedAt: at})
			if validate(doc, schema, decode(t, b), "body") == nil {
				t.Errorf("%s: %s validates", tc.typ, b)
			}
		}
	}
	sig := doc.Components.Parameters["HongbaoSignature"]
	if sig["name"] != "Hongbao-Signature" {
		t.Errorf("signature header named %v", sig["name"])
	}
	if err := validate(doc, sig["schema"].(map[string]any), "t=1773547200,v1="+strings.Repeat("ab", 32), "header"); err != nil {
		t.Errorf("a signature header does not validate: %v", err)
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// validate checks v against the JSON Schema subset openapi.json's webhooks
// use: $ref, allOf, type, const, enum, pattern, minimum, required,
// properties and additionalProperties false.
func validate(doc openAPIDoc, s map[string]any, v any, at string) error {
	if ref, ok := s["$ref"].(string); ok {
		return validate(doc, doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")], v, at)
	}
	for _, sub := range asList(s["allOf"]) {
		if err := validate(doc, sub.(map[string]any), v, at); err != nil {
			return err
		}
	}
	if c, ok := s["const"]; ok && c != v {
		return fmt.Errorf("%s: %v, want %v", at, v, c)
	}
	if e, ok := s["enum"]; ok && !slices.Contains(asList(e), v) {
		return fmt.Errorf("%s: %v not in %v", at, v, e)
	}
	switch s["type"] {
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: %v is not a string", at, v)
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", at, str, p)
		}
	case "integer":
		n, ok := v.(float64)
		if !ok || n != float64(int64(n)) {
			return fmt.Errorf("%s: %v is not an integer", at, v)
		}
		if m, ok := s["minimum"].(float64); ok && n < m {
			return fmt.Errorf("%s: %v below %v", at, n, m)
		}
	case "object":
		return validateObject(doc, s, v, at)
	}
	return nil
}

func validateObject(doc openAPIDoc, s map[string]any, v any, at string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: %v is not an object", at, v)
	}
	props, _ := s["properties"].(map[string]any)
	for _, r := range asList(s["required"]) {
		if _, ok := obj[r.(string)]; !ok {
			return fmt.Errorf("%s: required %s missing", at, r)
		}
	}
	for k, fv := range obj {
		ps, ok := props[k].(map[string]any)
		if !ok {
			if s["additionalProperties"] == false {
				return fmt.Errorf("%s: %s is not documented", at, k)
			}
			continue
		}
		if err := validate(doc, ps, fv, at+"."+k); err != nil {
			return err
		}
	}
	return nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
