package router

import (
	"encoding/json"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// TestCodeOfProblem: the code read off the bytes is the code the whole
// document says, for every problem the servers write and for documents
// written otherwise (other key order, escapes, nesting), which are decoded.
func TestCodeOfProblem(t *testing.T) {
	const pj = "application/problem+json"
	for _, err := range []error{hongbao.ErrSoldOut, hongbao.ErrBusy, hongbao.ErrExpired, hongbao.ErrWrongSet,
		&hongbao.InvalidError{Code: "invalid_id", Field: "id", Message: `"code":"x" {[ is not an ID`}} {
		body := api.ProblemOf(err, `r"q`).AppendJSON(nil)
		if got, want := codeOfProblem(pj, body), hongbao.Code(err); got != want {
			t.Errorf("%s: code %q, want %q", body, got, want)
		}
	}
	for body, want := range map[string]string{
		`{"code":"sold_out"}`:                                          "sold_out",
		`{"detail":{"code":"inner"},"code":"outer"}`:                   "", // not a problem document: as before, no code
		`{"instance":{"code":"inner"},"code":"outer"}`:                 "",
		`{"type":"about:blank","title":"a\"code\":\"b","code":"busy"}`: "busy",
		`{"x\"code":"fake","code":"real"}`:                             "real",
		`{"code":"a\u005fb"}`:                                          "a_b",
		`not json`:                                                     "",
		`{"title":"[","code":"expired"}`:                               "expired",
	} {
		var p api.Problem
		if json.Unmarshal([]byte(body), &p) == nil && p.Code != want {
			t.Fatalf("test case %s: encoding/json says %q", body, p.Code)
		}
		if got := codeOfProblem(pj, []byte(body)); got != want {
			t.Errorf("%s: code %q, want %q", body, got, want)
		}
	}
	if got := codeOfProblem("application/json", []byte(`{"code":"sold_out"}`)); got != "" {
		t.Errorf("not a problem: code %q", got)
	}
}
