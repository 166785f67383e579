package eticket

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tatkal/booking/i18n"
)

// The Hindi e-ticket carries its Hindi words as text (read back by
// poppler's pdftotext, a reader that is not ours) and its Latin names and
// codes alongside; TATKAL_SCREENSHOTS gets a picture of its first page
// (pdftoppm) to look at.
func TestHindiTicketPDF(t *testing.T) {
	exe, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext not installed (apt-get install -y poppler-utils)")
	}
	tk := Ticket{Lang: "hi", PNR: "8123456789", Status: i18n.Text("hi", "state.CONFIRMED"), Train: "12951", TrainName: "Mumbai Rajdhani",
		Class: "3A", From: "MMCT", To: "NDLS", FromName: "Mumbai Central", ToName: "New Delhi", Date: i18n.Date("hi", time.Date(2026, 12, 12, 0, 0, 0, 0, time.UTC)),
		Boards: "17:00 IST", Arrives: "08:32 IST", Booked: "10:00 IST", Total: "3,052.00", TotalWords: i18n.RupeesInWords("hi", 305200),
		Passengers: []Passenger{{Name: "Kavya Raman", Age: "34", Gender: "F", Berth: "B1 / 12 LB"}},
		Fare:       []FareLine{{Item: "basic", Amount: "2,400.00"}, {Item: "tatkal", Amount: "400.00"}},
		Rules:      []string{i18n.Text("hi", "rule.1")}, Printed: time.Date(2026, 12, 11, 10, 0, 0, 0, time.UTC)}
	pdf, err := PDF(tk)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "hi.pdf")
	if err := os.WriteFile(f, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "-layout", f, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	text := string(out)
	for _, want := range []string{"8123456789", "Kavya Raman", "Mumbai Central", "B1 / 12 LB", "3,052.00", "हज़ार", "कन्फ़र्म"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Hindi PDF lacks %q:\n%s", want, text)
		}
	}
	if d := os.Getenv("TATKAL_SCREENSHOTS"); d != "" {
		if ppm, err := exec.LookPath("pdftoppm"); err == nil {
			os.MkdirAll(d, 0o755)                                                                                //nolint:errcheck
			exec.Command(ppm, "-png", "-r", "80", "-f", "1", "-l", "1", f, filepath.Join(d, "eticket-hi")).Run() //nolint:errcheck
		}
	}
}
