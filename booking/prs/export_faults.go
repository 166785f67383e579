package prs

import (
	"errors"
	"fmt"
)

// ExportFaults are the mistakes the core's export makes, set at
// PUT /admin/export-faults, so the reconciliation of the core leg can be
// tested. Each pick hits the PNRs it names and, with probability Rate,
// any other: a hash of Seed and the PNR decides, so an export is the same
// every time it is fetched.
type ExportFaults struct {
	Seed       int64      `json:"seed"`
	Drop       ExportPick `json:"drop"`        // the booking is missing
	ChangeFare ExportPick `json:"change_fare"` // Paise added to the fare (default 100)
	// UnknownPNRs adds that many bookings we never made to every export.
	UnknownPNRs int `json:"unknown_pnrs"`
}

// ExportPick chooses the bookings one export fault hits.
type ExportPick struct {
	Rate  float64  `json:"rate,omitempty"`
	PNRs  []string `json:"pnrs,omitempty"`
	Paise int64    `json:"paise,omitempty"`
}

// Validate says what is wrong with an export fault setting, or nil.
func (f ExportFaults) Validate() error {
	for name, p := range map[string]ExportPick{"drop": f.Drop, "change_fare": f.ChangeFare} {
		if !(p.Rate >= 0 && p.Rate <= 1) || len(p.PNRs) > 10000 || p.Paise < -1_000_000_00 || p.Paise > 1_000_000_00 {
			return fmt.Errorf("%s: rate in [0,1], at most 10000 PNRs, paise within ±10,00,000 rupees", name)
		}
	}
	if f.UnknownPNRs < 0 || f.UnknownPNRs > 1000 {
		return errors.New("unknown_pnrs must be 0..1000")
	}
	return nil
}
