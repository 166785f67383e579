package prssim

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"tatkal/booking/prs"
)

// exportEncoder writes an export one booking at a time.
type exportEncoder interface {
	write(prs.Booking) error
	close() error
	started() bool // whether any byte may have reached the client
}

// trackingWriter remembers whether anything went out, which decides how
// a failure can still be reported.
type trackingWriter struct {
	w     io.Writer
	wrote bool
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	t.wrote = true
	return t.w.Write(p)
}

type jsonExport struct {
	out *trackingWriter
	buf *bufio.Writer
	n   int
}

func newJSONExport(w http.ResponseWriter) *jsonExport {
	w.Header().Set("Content-Type", "application/json")
	out := &trackingWriter{w: w}
	return &jsonExport{out: out, buf: bufio.NewWriterSize(out, 32<<10)}
}

func (e *jsonExport) write(b prs.Booking) error {
	sep := byte(',')
	if e.n == 0 {
		sep = '['
	}
	e.n++
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode %s: %w", b.PNR, err)
	}
	e.buf.WriteByte(sep) //nolint:errcheck // a write error sticks and surfaces below
	_, err = e.buf.Write(body)
	return err
}

func (e *jsonExport) close() error {
	end := "]\n"
	if e.n == 0 {
		end = "[]\n" // an empty day is [], never null
	}
	if _, err := e.buf.WriteString(end); err != nil {
		return err
	}
	return e.buf.Flush()
}

func (e *jsonExport) started() bool { return e.out.wrote }

type csvExport struct {
	out  *trackingWriter
	cw   *csv.Writer
	rows int
}

func newCSVExport(w http.ResponseWriter) *csvExport {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	out := &trackingWriter{w: w}
	return &csvExport{out: out, cw: csv.NewWriter(out)}
}

func (e *csvExport) write(b prs.Booking) error {
	if e.rows == 0 {
		if err := e.cw.Write(prs.CSVHeader()); err != nil {
			return err
		}
	}
	for _, row := range prs.CSVRows(b) {
		if err := e.cw.Write(row); err != nil {
			return err
		}
		e.rows++
	}
	return nil // csv.Writer flushes to the client whenever its buffer fills
}

func (e *csvExport) close() error {
	if e.rows == 0 {
		if err := e.cw.Write(prs.CSVHeader()); err != nil {
			return err
		}
	}
	e.cw.Flush()
	return e.cw.Error()
}

func (e *csvExport) started() bool { return e.out.wrote }
