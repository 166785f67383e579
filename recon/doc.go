// Package recon is the reconciliation back office: it ingests the outside
// records of every rupee (each gateway's settlement file, the bank's statement
// of payouts, the reservation core's export) with their lineage, matches them
// against ours set-wise in PostgreSQL, and turns every difference into an
// exception with a kind, an owning team, an SLA and a resolution path.
// Automatic resolutions run as River jobs through the same payment and booking
// code as the live path.
//
// # Files
//
// Three legs against ours: each gateway's settlement file (swiftpay: signed
// rupees, DD/MM/YYYY; bharatpg: paise, YYYYMMDD; captures, refunds,
// chargebacks, fee and GST per line, payout id), the bank's payouts, the
// core's export. Every file is kept with its lineage (source, gateway, day,
// SHA-256, rows, who or which job); the same bytes again change nothing, a
// corrected file supersedes the day's and both stay. Lines are normalised into
// recon_lines with the raw line kept. A file is evidence that starts a
// question, never the truth that moves money: a file our job fetched from the
// issuer is accepted as it arrives, an uploaded one only once a second person
// accepts it (accept.go). Files above TATKAL_RECON_MAX_FILE_MB are refused
// (FILE_TOO_LARGE) and nothing is stored.
//
// # Versions
//
// The files of a source, gateway and day are versions of that day's record;
// one is current, and runs read it (versions.go). A person may make an
// earlier version current again with a reason (MakeCurrent, audited);
// acceptance stays the file's own (an upload nobody else accepted starts no
// automatic resolution), and whoever put it back is behind what it raises,
// as its uploader is. Diff compares two versions line by line (lines paired
// by kind and reference): added, removed, changed, with both amounts. An
// earlier version sent again, fetched or uploaded, is never made current by
// that: Ingest answers Replayed with Earlier() and the current file, logs a
// warning, and changes nothing. The console's upload is previewed first
// (preview.go): PreviewUpload parses and totals it by kind of line, keeping
// its bytes in recon_upload_previews (purged after a day); ConfirmUpload,
// by its uploader only, ingests exactly those bytes; CancelUpload keeps
// nothing; bytes that are a version already are said so at the preview and
// kept nowhere.
//
// # Runs
//
// A run (Service.Run, one gateway's business date) is a fixed list of
// set-based SQL statements (exact keys, then T+0..T+3, one paisa, contracted
// fee and GST, then payout = sum of net lines and partial refunds within the
// capture) and merges what it finds into reconciliation_exceptions, one row
// per kind and reference ever: each kind with an owning team, an SLA and a
// path. A rerun finds the same rows; what no longer reproduces closes as
// CLEARED_ON_RERUN. The comparison with the core's export needs nothing of the
// settlement leg, so it runs on a second connection in its own transaction at
// the same time; its findings reach the run's transaction through the unlogged
// recon_run_found, and a run that fails afterwards removes what that leg
// committed. A PNR in the core's export that we never booked (CORE_ORPHAN)
// belongs to its journey date, not to a gateway: the core run of that date
// finds it (tatkal recon run --gateway core --date JOURNEY). Likewise a bank
// line (credit or debit) that no settlement file of its gateway from the
// ten days before announces as a payout belongs to its statement date: the
// bank run of that date finds it (UNEXPLAINED_CREDIT, UNEXPLAINED_DEBIT,
// owned by treasury; tatkal recon run --gateway bank --date STATEMENT),
// while whether an announced payout's credit is its lines' net stays the
// gateway run's question (PAYOUT_MISMATCH). The run's
// connection keeps its temporary tables in local buffers and gathers
// statistics only of the columns its rules join on.
//
// # At stake
//
// Each exception keeps the gross amount it is about (amount_paise: the
// payment, the payout, the fee), the signed difference where two legs
// disagree on an amount (diff_paise, theirs less ours) and what is at stake
// (stake_paise), which each rule states: the difference for a mismatch of
// amount, fee and GST, refund, payout or fare; the whole item where the
// whole item is in question (a charge without a ticket, a missing line, an
// orphan, an unexplained bank line). Totals (runs, days, the overdue, the
// escalation's message), ageing, the amount filter, the approval limit and
// write-offs count the stake: a ₹5 short payout is ₹5 at stake and a write-
// off of ₹5 (written_off_paise, fixed when approved), the payout beside it.
//
// # Books that tie out
//
// Settlement: a gateway's file of a day as a statement, captures − refunds
// − chargebacks − fees − GST = the payout its lines announce = what the
// bank moved for it. WalletRollForward: opening + top-ups + refunds in −
// spends − withdrawals = closing, against the ledger's running balances
// and against the payments and refunds behind each term. Each to the
// paisa, each difference shown where it arises (the console's books page,
// the workbook's Ties out sheet).
//
// # Lifecycle
//
// Automatic paths are River jobs (ResolveArgs) inserted with the exception,
// resolved through the payment code (status inquiry, late success,
// duplicate-charge refund) or the core sync; the gateway is asked now, the
// settlement line only starts the question. One moving more than
// TATKAL_RECON_APPROVAL_RUPEES (₹10,000) at stake waits for a second finance person,
// never one who uploaded a line behind it or ran the run that found it. People
// assign, note, resolve with a code the kind allows, and write off by two
// people; exceptions past their SLA escalate.
//
// Escalation (every 15 minutes, Escalate) marks the exceptions newly past
// their SLA (escalated_at, an ESCALATED event) and, in the same statement,
// leaves one console message per escalation to each finance lead
// (console_users.finance_lead), or to every active finance user while no lead
// is active; console users have no phone or e-mail, so it is console_messages,
// not the passengers' outbox. Messages carry a read mark (read_at): the
// finance home counts the unread and MarkMessagesRead marks them. Not built:
// evidence attachments are the legs' raw lines, not uploaded documents.
//
// # Working the list
//
// WorkRows is the list a clerk works: each exception with the gateway's
// transaction id and the PNR (its own, else its payment's, refund's or
// hold's booking), the transaction's time beside the detection time (age
// from either), sorted by a column (SortKeys) and paged; WriteWorklistCSV
// exports the whole filtered list, sorted the same. HandTo gives an
// exception to another owning team (Teams: the kinds' owners), unassigned
// and open for them. ForTeams scopes a person's changes through ctx to
// the exceptions their teams own (a console team member's): every change
// checks the owner under the exception's lock. WriteWorklistXLSX is the
// filtered list as a workbook, in the run workbook's money formats.
// AskGatewayNow acts on the money where the path says
// so: on AUTO it is the automatic resolution run at once in the person's
// name (the same approval limit and upload acceptance); on INQUIRY it asks
// the gateway, applies the answer through the status inquiry's own step
// when our record is unresolved, and writes the answer into the history.
// Refund now is ProposeRefund and ApproveRefund (recon_refund_proposals):
// two people, never one behind the exception, and only while the gateway,
// asked then, holds the money; the refund goes through the payment's
// refund path in the transaction that resolves the exception as REFUNDED.
// Bulk runs one of these on many rows, each in its own transaction: a
// refused row is that row's outcome and changes nothing, the rest go on.
//
// # Daily
//
// At a time of day in IST (TATKAL_RECON_AT, 06:00; jobs/schedule) the daily
// plan (DailyArgs, once per day across processes, one transaction) plans
// the bank leg and the gateways' days, each its own job, unique by its
// date and the day that planned it (planning a day again adds nothing).
// The bank: yesterday's statement (StatementArgs: fetched by its date, then
// the bank run of that statement date), and again every earlier statement
// date until T+TATKAL_RECON_RERUN_DAYS (7) that was never reconciled or
// still has an unexplained credit or debit open (OpenDays of Bank): a late
// settlement file or the bank's corrected statement may explain it. Per
// gateway: yesterday (T+1) and again every earlier day that is still
// open, until T+TATKAL_RECON_RERUN_DAYS: a day never reconciled, a day
// whose latest run left a capture, refund or payout neither matched nor
// an exception (its line or credit not yet come), or a day with an
// exception still open (OpenDays). Each day is a FetchArgs job: its
// settlement file, the bank statements of the three days after that are
// whole, and the core's exports of its journey dates, fetched side by
// side, then run. So a payout of T is matched when T is run again on T+2
// with the statement of T+1, and money that never arrives is named once
// past T+3 (MISSING_IN_SETTLEMENT, REFUND_NOT_SETTLED, PAYOUT_MISMATCH)
// instead of waiting for a person to re-run the day; a credit nobody
// announced is named the morning after it lands (UNEXPLAINED_CREDIT).
//
// # Month end
//
// MonthReport is a month (IST, all gateways) from the exceptions' history,
// not their state now (a cleared exception can reopen): opening unresolved,
// found (detected or reopened), resolved, written off, closing, by kind and
// by owning team, opening + found − resolved − written off = closing by
// count and amount (the stake; what was written off for a written-off
// one). Its ageing report ages what was unresolved at the month's end from
// detection in MonthBuckets (0-2, 3-7, 8-30, over 30 days) per kind. A
// finance lead signs a month that is over (SignMonth, audited); the report
// is then frozen as signed in recon_month_signoffs (append-only), shown and
// exported as signed, with a note when today's figures differ.
// WriteMonthXLSX is the month's workbook. MonthOf is a month's figures of
// one gateway's exceptions (today's: the signature is the whole month's).
//
// # Exports
//
// WriteXLSX streams the workbook (Summary, Ties out for a gateway's or the
// wallet's run, a sheet per kind, Matched,
// continued on "Matched 2" and after beyond Excel's 1,048,576 rows) straight
// into its io.Writer, zip included; WriteCSV writes the exceptions. The
// Summary's figures and its exceptions by kind are two Excel tables, so
// sorting one leaves the other alone. Amounts are numbers shown as the
// console shows them, in lakhs and crores (MoneyFormat: each cell the plain
// positive;negative format its amount's digits need, since Excel groups by
// thousands and signs conditional sections unlike LibreOffice). Text cells
// that a spreadsheet would run as a formula are written as text
// (booking/csvx), and the CSV starts with the UTF-8 BOM so Excel reads the
// rupee sign. tatkal recon ingest|run|export does all of it by hand (--by
// defaults to $USER).
package recon
