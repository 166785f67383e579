package recon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
)

const swiftHead = "Txn Type,SwiftPay Txn ID,Merchant Order ID,Refund ID,Merchant Refund ID,Payment Mode,Gross Amount (INR),MDR (INR),GST on MDR (INR),Net Amount (INR),Txn Date,Settlement Date,Payout Ref\n"

// Files keep their lineage; the same bytes again change nothing; a bad
// file is refused whole with the line and the reason, and stores nothing.
func TestIngest(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	svc := New(Config{Pool: env.Pool})
	day := time.Date(2025, 6, 4, 0, 0, 0, 0, booking.IST)
	good := swiftHead +
		"CAPTURE,pay_1,0197a0c8-0000-7000-8000-000000000001,,,CARD,1234.50,22.22,4.00,1208.28,04/06/2025 12:00:01,05/06/2025,SWP20250604\n" +
		"REFUND,pay_1,0197a0c8-0000-7000-8000-000000000001,rfnd_1,0197a0c8-0000-7000-8000-0000000000aa,CARD,-100.5,0.00,0.00,-100.50,04/06/2025 13:00:00,05/06/2025,SWP20250604\n"
	meta := FileMeta{Source: SourceSettlement, Gateway: "swiftpay", BusinessDate: day, Name: "f.csv", By: "finance1"}
	f, err := svc.Ingest(ctx, meta, strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if f.Rows != 2 || f.Format != FormatSwiftpay || f.IngestedBy != "finance1" || len(f.SHA256) != 64 || f.Bytes != int64(len(good)) || f.Replayed {
		t.Fatalf("file %+v", f)
	}
	var kind, ext, merchant, parent, raw string
	var amount, fee, tax, net int64
	var value time.Time
	if err := env.Pool.QueryRow(ctx, `SELECT kind, ext_ref, merchant_ref, parent_ref, amount_paise, fee_paise, tax_paise, net_paise, value_date, raw
		FROM recon_lines WHERE file_id = $1 AND line_no = 3`, f.ID).Scan(&kind, &ext, &merchant, &parent, &amount, &fee, &tax, &net, &value, &raw); err != nil {
		t.Fatal(err)
	}
	if kind != LineRefund || ext != "rfnd_1" || parent != "pay_1" || !strings.HasSuffix(merchant, "aa") || amount != 10050 || net != -10050 ||
		value.Format(time.DateOnly) != "2025-06-05" || !strings.HasPrefix(raw, "REFUND,pay_1,") {
		t.Fatalf("refund line %s %s %s %s %d %d %d %d %v %q", kind, ext, merchant, parent, amount, fee, tax, net, value, raw)
	}
	again, err := svc.Ingest(ctx, FileMeta{Source: SourceSettlement, Gateway: "swiftpay", BusinessDate: day, By: "job:fetch"}, strings.NewReader(good))
	if err != nil || !again.Replayed || again.ID != f.ID || again.IngestedBy != "finance1" {
		t.Fatalf("same bytes again: %+v %v", again, err)
	}

	files := func() int {
		var n int
		env.Pool.QueryRow(ctx, `SELECT count(*) FROM recon_files`).Scan(&n) //nolint:errcheck
		return n
	}
	for name, c := range map[string]struct {
		meta FileMeta
		body string
		want string
	}{
		"bad amount":   {meta, swiftHead + "CAPTURE,pay_2,x,,,UPI,12.345,0,0,12.35,04/06/2025 12:00:01,05/06/2025,P\n", "line 2: Gross Amount"},
		"bad date":     {meta, swiftHead + "CAPTURE,pay_2,x,,,UPI,12.34,0,0,12.34,2025-06-04,05/06/2025,P\n", "line 2: Txn Date"},
		"bad type":     {meta, swiftHead + "SALE,pay_2,x,,,UPI,12.34,0,0,12.34,04/06/2025 12:00:01,05/06/2025,P\n", "Txn Type"},
		"short line":   {meta, swiftHead + "CAPTURE,pay_2\n", "line 2: 2 columns"},
		"wrong header": {meta, "type,psp_ref\n", "a swiftpay-v1 file starts"},
		"empty":        {meta, "", "empty file"},
		"late error":   {meta, good + "CAPTURE,pay_9,x,,,UPI,1,0,0,x,04/06/2025 12:00:01,05/06/2025,P\n", "line 4: Net Amount"},
		"bank as gw":   {FileMeta{Source: SourceBank, Gateway: "swiftpay", BusinessDate: day, By: "a"}, good, "belongs to no gateway"},
		"format":       {FileMeta{Source: SourceCore, Format: FormatBank, BusinessDate: day, By: "a"}, good, "cannot be in format"},
		"no date":      {FileMeta{Source: SourceSettlement, Gateway: "swiftpay", By: "a"}, good, "business date"},
		"no actor":     {FileMeta{Source: SourceSettlement, Gateway: "swiftpay", BusinessDate: day}, good, "who"},
		"no gateway":   {FileMeta{Source: SourceSettlement, BusinessDate: day, By: "a"}, good, "gateway"},
	} {
		n := files()
		_, err := svc.Ingest(ctx, c.meta, strings.NewReader(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) || booking.ErrorCode(err) != booking.EINVALID {
			t.Errorf("%s: %v, want an invalid-file error naming %q", name, err, c.want)
		}
		if files() != n {
			t.Errorf("%s: a refused file was stored", name)
		}
	}

	// bharatpg in paise; the bank's statement names gateway and payout.
	bpg := "settlement_date,utr,entry_type,pg_txn_id,merchant_txn_ref,merchant_refund_ref,pg_refund_id,pay_method,txn_amount_paise,commission_paise,igst_paise,settled_paise,txn_timestamp\n" +
		"20250605,BPGUTR20250604,CHBK,bpg_7,m7,,,NETBANKING,5000,0,0,-5000,2025-06-04T06:30:00Z\n"
	fb, err := svc.Ingest(ctx, FileMeta{Source: SourceSettlement, Gateway: "bharatpg", BusinessDate: day, By: "a"}, strings.NewReader(bpg))
	if err != nil || fb.Rows != 1 {
		t.Fatalf("bharatpg: %+v %v", fb, err)
	}
	bank := "Txn Date,Value Date,Description,Ref No,Debit,Credit\n05-Jun-2025,05-Jun-2025,NEFT CR-BHARATPG SETTLEMENT-BPGUTR20250604,HDFCN1,,123.45\n"
	if _, err := svc.Ingest(ctx, FileMeta{Source: SourceBank, BusinessDate: day.AddDate(0, 0, 1), By: "a"}, strings.NewReader(bank)); err != nil {
		t.Fatal(err)
	}
	var gw, payout, method string
	env.Pool.QueryRow(ctx, `SELECT gateway, ext_ref, net_paise FROM recon_lines WHERE source = 'BANK'`).Scan(&gw, &payout, &net) //nolint:errcheck
	env.Pool.QueryRow(ctx, `SELECT method, kind FROM recon_lines WHERE ext_ref = 'bpg_7'`).Scan(&method, &kind)                  //nolint:errcheck
	if gw != "bharatpg" || payout != "BPGUTR20250604" || net != 12345 || method != "NB" || kind != LineChargeback {
		t.Fatalf("bank line %s %s %d; bharatpg line %s %s", gw, payout, net, method, kind)
	}
}

// Ingest parses the merchant reference as our uuid by the same rule as
// the database's recon_uuid, which matching used before the column.
func TestMerchantUUIDAsSQL(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	for _, ref := range []string{
		"0197a0c8-0000-7000-8000-000000000001", "0197A0C8-0000-7000-8000-00000000000F", "", "ORD-1",
		"0197a0c800007000800000000000000100001", "{0197a0c8-0000-7000-8000-000000000001}", "urn:uuid:0197a0c8-0000-7000-8000-000000000001",
		"0197a0c80000700080000000000000000001", "0197a0c8-0000-7000-8000-00000000000g", "0197a0c8-0000-7000-8000_000000000001",
	} {
		var want pgtype.UUID
		if err := env.Pool.QueryRow(ctx, `SELECT recon_uuid($1)`, ref).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := merchantUUID(ref); got != want {
			t.Errorf("merchantUUID(%q) = %v, recon_uuid says %v", ref, got, want)
		}
	}
}

// A file past the size limit is refused whole, whatever the point its
// bytes run out at (the header, a line, the bytes after the last line),
// and stores nothing; one at the limit is taken.
func TestIngestSizeLimit(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	day := time.Date(2025, 6, 4, 0, 0, 0, 0, booking.IST)
	body := swiftHead + "CAPTURE,pay_1,0197a0c8-0000-7000-8000-000000000001,,,CARD,1234.50,22.22,4.00,1208.28,04/06/2025 12:00:01,05/06/2025,SWP20250604\n"
	meta := FileMeta{Source: SourceSettlement, Gateway: "swiftpay", BusinessDate: day, Name: "f.csv", By: "finance1"}
	for _, limit := range []int64{10, int64(len(swiftHead)) + 5, int64(len(body)) - 1} {
		svc := New(Config{Pool: env.Pool, MaxFileBytes: limit})
		_, err := svc.Ingest(ctx, meta, strings.NewReader(body))
		if booking.ErrorReason(err) != ReasonFileTooLarge || booking.ErrorCode(err) != booking.EINVALID {
			t.Fatalf("limit %d: %v, want %s", limit, err, ReasonFileTooLarge)
		}
		var files, lines, audits int
		env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM recon_files), (SELECT count(*) FROM recon_lines),
			(SELECT count(*) FROM audit_log WHERE action = 'recon.ingest')`).Scan(&files, &lines, &audits) //nolint:errcheck
		if files != 0 || lines != 0 || audits != 0 {
			t.Fatalf("limit %d: a refused file left %d files, %d lines, %d audit rows", limit, files, lines, audits)
		}
	}
	svc := New(Config{Pool: env.Pool, MaxFileBytes: int64(len(body))})
	if f, err := svc.Ingest(ctx, meta, strings.NewReader(body)); err != nil || f.Rows != 1 || f.Bytes != int64(len(body)) {
		t.Fatalf("a file at the limit: %+v %v", f, err)
	}
}
