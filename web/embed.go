// Package web holds the controller's web UI: plain HTML, CSS and JavaScript
// modules with one vendored chart library (uPlot), embedded in the binary
// so the controller serves it at / with no build step and no files beside
// the binary.
package web

import (
	"embed"
	"io/fs"
)

//go:embed index.html app.css favicon.svg js vendor
var files embed.FS

// FS is the UI's files, rooted so that "index.html" is the page served at
// "/". Serve it with http.FileServerFS(web.FS).
var FS fs.FS = files
