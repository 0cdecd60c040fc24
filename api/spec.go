package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Spec is the part of the OpenAPI description that says which statuses
// and problem codes each operation answers: what tests hold the handlers
// to.
type Spec struct {
	// Ops maps "METHOD /path/{param}" to status to the problem codes it
	// lists (none for a success).
	Ops map[string]map[int][]string
	// Unmatched lists the codes of a request no operation serves: a path
	// the API does not have, or a method its path does not take.
	Unmatched []string
	// Unparsed lists the codes of a request answered before any
	// operation could be matched: one HTTP cannot parse, or whose headers
	// are over the limit (RefusedAsProblems). Any path may answer them.
	Unparsed []string
}

// ParseSpec reads the embedded OpenAPI description.
func ParseSpec() (*Spec, error) {
	type response struct {
		Codes []string `json:"x-problem-codes"`
	}
	var doc struct {
		Paths     map[string]map[string]struct{ Responses map[string]response } `json:"paths"`
		Unmatched response                                                      `json:"x-unmatched"`
		Unparsed  response                                                      `json:"x-unparsed"`
	}
	if err := json.Unmarshal([]byte(openAPI), &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.json: %w", err)
	}
	s := &Spec{Ops: map[string]map[int][]string{}, Unmatched: doc.Unmatched.Codes, Unparsed: doc.Unparsed.Codes}
	for path, methods := range doc.Paths {
		for method, op := range methods {
			st := map[int][]string{}
			for code, r := range op.Responses {
				n, err := strconv.Atoi(code)
				if err != nil {
					return nil, fmt.Errorf("api: openapi.json: %s %s: status %q", method, path, code)
				}
				st[n] = r.Codes
			}
			s.Ops[strings.ToUpper(method)+" "+path] = st
		}
	}
	return s, nil
}

// Operations returns the operations, sorted.
func (s *Spec) Operations() []string {
	ops := make([]string, 0, len(s.Ops))
	for op := range s.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// Match returns the operation serving method and a concrete path
// ("POST /v1/packets/123/open" -> "POST /v1/packets/{id}/open"), or "".
func (s *Spec) Match(method, path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	for op := range s.Ops {
		m, tmpl, _ := strings.Cut(op, " ")
		if m != method {
			continue
		}
		tp := strings.Split(tmpl, "/")
		if len(tp) != len(parts) {
			continue
		}
		ok := true
		for i := range tp {
			if tp[i] != parts[i] && !(strings.HasPrefix(tp[i], "{") && parts[i] != "") {
				ok = false
				break
			}
		}
		if ok {
			return op
		}
	}
	return ""
}

// Check reports whether the spec allows an answer: status (and for a
// problem, its code) among those of the operation serving method and path,
// or of an unmatched path, or of a request that did not parse.
func (s *Spec) Check(method, path string, status int, code string) error {
	if want, ok := statusOf[code]; ok && status == want && slices.Contains(s.Unparsed, code) {
		return nil
	}
	op := s.Match(method, path)
	if op == "" {
		if want, ok := statusOf[code]; ok && status == want && slices.Contains(s.Unmatched, code) {
			return nil
		}
		return fmt.Errorf("%s %s: no such operation in openapi.json, and %d %q is not the unmatched answer", method, path, status, code)
	}
	codes, ok := s.Ops[op][status]
	if !ok {
		return fmt.Errorf("%s (%s %s): status %d not in openapi.json", op, method, path, status)
	}
	if code != "" && !slices.Contains(codes, code) {
		return fmt.Errorf("%s: status %d with code %q not in openapi.json (it lists %v)", op, status, code, codes)
	}
	if code == "" && len(codes) > 0 {
		return fmt.Errorf("%s: status %d without a problem code, openapi.json lists %v", op, status, codes)
	}
	return nil
}
