// Package static will embed the CSS, scripts and icons, served under content-hash URLs.
package static
