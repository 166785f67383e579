// Package views will hold the templ components of every page.
package views
