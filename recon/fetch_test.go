package recon

import (
	"testing"

	"tatkal/booking"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// The daily job fetches the gateway's file, the bank's statements and the
// core's exports over HTTP, with lineage naming the job, and reconciles.
func TestFetchJob(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.make(cleanSet("swiftpay", 9)...)
	worker := &FetchWorker{Recon: w.svc, Sources: w.src}
	w.must(worker.Work(w.ctx, &river.Job[FetchArgs]{JobRow: &rivertype.JobRow{}, Args: FetchArgs{Gateway: "swiftpay", Date: w.day}}))
	sum, err := w.svc.LatestRun(w.ctx, "swiftpay", w.day)
	w.must(err)
	if sum.Lines != 10 || sum.Exceptions != 0 || sum.Matched != 9+1+1+9 || sum.RunBy != "job:recon_fetch" {
		t.Fatalf("run %+v", sum)
	}
	// And the journey date's export as a whole, for PNRs no gateway paid for.
	core, err := w.svc.LatestRun(w.ctx, Core, w.shard.Journey)
	w.must(err)
	if core.Lines != 9 || core.Matched != 9 || core.Exceptions != 0 || core.RunBy != "job:recon_fetch" {
		t.Fatalf("core run %+v", core)
	}
	if n := w.count(`SELECT count(*) FROM recon_files WHERE ingested_by = 'job:recon_fetch'`); n != 5 {
		t.Fatalf("%d files fetched, want the settlement file, three statements and one export", n)
	}
}

// The bank's statement is fetched with the bank's own credential, never
// without one: no credential, a clear refusal and nothing stored; the
// simulator's admin token is refused by the bank.
func TestBankStatementNeedsTheBanksCredential(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.make(cleanSet("swiftpay", 2)...)
	none := w.src
	none.BankToken = ""
	if _, err := w.svc.FetchBank(w.ctx, none, w.day, "job:test"); booking.ErrorReason(err) != "NO_BANK_CREDENTIAL" {
		t.Fatalf("fetch without a bank credential: %v, want NO_BANK_CREDENTIAL", err)
	}
	admin := w.src
	admin.BankToken = pspAdmin
	if _, err := w.svc.FetchBank(w.ctx, admin, w.day, "job:test"); err == nil {
		t.Fatal("the simulator's admin token fetched the bank's statement")
	}
	if n := w.count(`SELECT count(*) FROM recon_files WHERE source = 'BANK'`); n != 0 {
		t.Fatalf("%d statements stored by refused fetches", n)
	}
	if _, err := w.svc.FetchBank(w.ctx, w.src, w.day, "job:test"); err != nil {
		t.Fatalf("fetch with the bank's credential: %v", err)
	}
}
