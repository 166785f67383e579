// Package recon will hold three-way payment reconciliation, exceptions and XLSX export.
package recon
