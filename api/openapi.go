package api

import _ "embed" // the OpenAPI description

// openAPI is the OpenAPI 3.1 description of the public API (openapi.json
// beside this file); a string, so nobody can change it.
//
//go:embed openapi.json
var openAPI string

// OpenAPI returns the OpenAPI 3.1 description of the public API, as the
// router serves it at GET /openapi.json.
func OpenAPI() string { return openAPI }
