package api

import (
	_ "embed"
	"net/http"
)

// openAPI describes the API (OpenAPI 3.1). Tests check that it documents
// every route the server has.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
