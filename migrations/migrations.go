// Package migrations embeds the numbered SQL migrations of tatkal's own
// schema. River's tables come from River's migrator, not from here.
package migrations

import "embed"

// FS holds NNN_name.up.sql files, applied in name order.
//
//go:embed *.sql
var FS embed.FS
