package views

// LabRequest is what the Lab page's form starts.
type LabRequest struct {
	Travellers int
	Berths     int
	Aggressive float64
	DurationS  int
	Mode       string
	Seed       uint64
	Fault      string // NAME@FROM-TO or empty
}

// LabPoint is one second of a running rehearsal.
type LabPoint struct {
	Mode       string
	T          int
	Backend    int64
	Rejected   int64
	Booked     int64
	QueueDepth int64
	Capacity   float64 // the backend's capacity in this second, calls / s
	Admitted   int64   // travellers who saw their turn come
	Holds      int64   // holds that took seats
	Payments   int64   // payments started
}

// LabRun is one rehearsal as the Lab page shows it.
type LabRun struct {
	ID        int64
	State     string // RUNNING, DONE, FAILED
	StartedBy string
	StartedAt string
	Options   string
	Error     string
	Points    []LabPoint
	// Rows: label, then one value per mode (Modes).
	Modes    []string
	Rows     [][]string
	Follow   []LabFollow
	Markdown string
}

// LabFollow is the followed traveller's path in one mode.
type LabFollow struct {
	Mode  string
	Steps []string
}

// LabPage is the Lab's front page: the form and earlier runs.
type LabPage struct {
	Error   string
	Runs    []LabRun
	Faults  []string
	Running bool
}
