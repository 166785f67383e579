// Package web serves the passenger's HTML pages: server-rendered templ,
// working without JavaScript where they can (site.js adds the countdowns and
// the clock offset). Every page calls the same domain services as the JSON API
// in booking/api; nothing here decides a booking rule.
//
// One column sized for a phone, large targets, English and Hindi from one
// catalogue (booking/i18n), switched by a form that works without JavaScript.
// The choice, made signed in or before signing in, is stored as users.lang,
// and every message sent to a passenger is written in it from the same
// catalogue (booking.NotifyT). Sign-in goes through auth.PassengerLogin and
// the API's login guard, and the same revocation list: signing out on the site
// kills the token for the API too. Holds, payments and cancellations call
// booking.Holds.Hold, payment.Service.Initiate and CancelPreview, and the
// state in words comes from booking/bookingstate, as the API's status does.
//
//   - Session: the signed session token in an HttpOnly, SameSite=Lax cookie
//     (Lax so the bank's redirect comes back signed in); forms carry a token
//     bound to the browser and the session, on top of
//     http.CrossOriginProtection. Signing in binds the browser as a device
//     (admission.BindDevice); an unverified account is sent to OTP
//     verification (/verify, which requires the phone number) first.
//   - Opening an account (signup.go, booking/signup): /signup asks for the
//     mobile number and e-mail address, sends a code by SMS (the same words
//     whether the number has an account), then opens the account with the
//     code and a password and signs in; /identity checks the identity with
//     the identity service (an Aadhaar-style KYC), which makes the account
//     identity-verified; /reset sets a forgotten password with a code sent
//     to the account's number and signs out every session. Errors show
//     under their fields (aria-invalid, aria-describedby).
//   - Before 10:00 (/passengers): the master list (validated when saved with
//     the hold's own rules; at most 20), the payment choice (user_prefs),
//     identity and device status.
//   - Search (/search): trains between two stations on a date, each class's
//     band from the cached availability, the Tatkal opening time in IST and
//     the fare per passenger.
//   - Window (/book): a countdown synchronised to the server's clock (site.js
//     asks POST /v1/session/prepare for the offset; the hold button unlocks at
//     the opening with a 0-200 ms jitter, the page then says it is open and
//     brings the passengers into view). Hold sits in a bar fixed at the
//     bottom of a phone's screen, with "Tatkal tickets left today: n of 2"
//     (booking.Service.TatkalLeft, the committer's own count); none left
//     turns it off with the reason. It is rendered enabled: without
//     JavaScript the server refuses an early hold in words. Every button
//     that posts says at once that it is working and is disabled. A
//     sold-out journey offers the journeys still open instead of Hold. Direct shards show the hold form,
//     where nobody is ticked until the passenger chooses 1-4 saved passengers;
//     queue shards the waiting room from 15 minutes before (/queue: place,
//     wait and odds, the page reloading itself every poll_after_ms, the draw
//     explained), then the hold form. Every hold form, on every shard,
//     carries the booking-time challenge solved in a Web Worker
//     (static/pow-worker.js) from 50 s before the opening (renewed while the
//     form waits), or the code sent by SMS in its place (/book/otp); Hold
//     opens once the window is open and the check solved.
//   - Hold and pay (/bookings/{id}): countdown, fare breakup, pay by wallet,
//     UPI, card or net banking (the gateway's page is reached by a link: the
//     CSP's form-action 'self' also binds redirects), then the state in words
//     with the refund-by time while the bank decides. The bank's return page
//     shows the PNR and amount only to the signed-in owner of the payment.
//   - E-ticket (/bookings/{id}/ticket, .pdf from booking/eticket): PNR,
//     journey, passengers with coach and berth, fare breakup, a QR code of the
//     PNR and the Tatkal rules. Also booking history, cancellation showing the
//     refund before confirming, the wallet with its ledger and top-up.
//   - The degradation ladder (booking/degrade.go, the console's levers):
//     with light_form on for a shard, the booking page is the single-step
//     form, passengers and payment method in one submit that holds and
//     starts the payment; with the NON_ESSENTIAL kill switch on, booking
//     history and the e-ticket PDF answer a 503 page saying they are
//     switched off for the peak, and the booking page leaves out chart
//     details (TestBrowserSingleStepForm in console).
//   - Under load a bounded number of pages are served at once (512 per
//     process); beyond it, and for any panic or overload answer, the static
//     high-demand page (503, Retry-After), never a stack trace.
//
// Every word a passenger reads comes from the catalogue (booking/i18n):
// booking states (bookingstate's keys), errors by reason (err.REASON),
// the bank's pages, the waiting room, the ledger, dates (i18n.Date); forms
// keep what was typed and say each error under its field.
//
// The browser tests run the journeys in headless Chromium at phone width, one
// per mode (TestBrowserJourneyDirect, TestBrowserJourneyQueue), checking every
// page with axe-core (booking/lab/testenv) for serious or critical violations
// and reading the PDF back with poppler's pdftotext. TestBrowserPhoneOpening
// runs the opening in English and Hindi: Hold in view and enabled without
// scrolling, a visible answer within 100 ms of a tap, a waitlist hold never
// called a seat, no English word on a Hindi page, no overflow at 320 px.
package web
