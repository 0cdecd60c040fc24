// Package web is the red-packet page people use: plain HTML, CSS and
// JavaScript embedded in the binary (no build step, nothing fetched from
// elsewhere), served by the router at / with its files under /app/. The
// page talks to the public API with the user's bearer token; in a dev
// cluster it signs in through POST /dev/token, in production the host app
// hands it a token in the URL fragment (#token=...).
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the page: GET / is index.html, GET /app/<file> its files.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	assets := http.StripPrefix("/app/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Everything the page loads is its own: no inline script, no
		// other origin (a token lives in this page).
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, files, "index.html")
			return
		}
		assets.ServeHTTP(w, r)
	})
}
