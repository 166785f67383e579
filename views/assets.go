// Package views holds the templ components of every page. Generated
// *_templ.go files are committed; CI checks they are current.
package views

import "tatkal/static"

// StaticURL is the cache-forever address of an embedded asset.
func StaticURL(name string) string { return static.URL(name) }
