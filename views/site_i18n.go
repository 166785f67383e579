package views

import "context"

// The passenger site speaks English and Hindi. Every string a page shows
// of its own is in this one catalogue; messages the domain composes (a
// booking's state, an error) stay in English until they are catalogued too.

type langKey struct{}

// WithLang returns ctx carrying the page language ("en" or "hi").
func WithLang(ctx context.Context, lang string) context.Context {
	return context.WithValue(ctx, langKey{}, lang)
}

// Lang is the page language of ctx, English by default.
func Lang(ctx context.Context) string {
	if l, ok := ctx.Value(langKey{}).(string); ok && l == "hi" {
		return "hi"
	}
	return "en"
}

// T is the catalogue's string for key in the page's language; a missing
// Hindi string falls back to English, a missing key shows itself (so a
// test finds it).
func T(ctx context.Context, key string) string {
	s, ok := catalogue[key]
	if !ok {
		return key
	}
	if Lang(ctx) == "hi" && s[1] != "" {
		return s[1]
	}
	return s[0]
}

// Languages are the switch's choices: code and the language's own name.
var Languages = [][2]string{{"en", "English"}, {"hi", "हिन्दी"}}

var catalogue = map[string][2]string{
	"skip":                   {"Skip to content", "मुख्य सामग्री पर जाएँ"},
	"signin":                 {"Sign in", "साइन इन करें"},
	"signout":                {"Sign out", "साइन आउट"},
	"login":                  {"User ID", "यूज़र आईडी"},
	"password":               {"Password", "पासवर्ड"},
	"signin.intro":           {"Sign in 10-15 minutes before the window opens, so that at 10:00 you only choose and pay.", "विंडो खुलने से 10-15 मिनट पहले साइन इन करें, ताकि 10:00 बजे आपको केवल चुनना और भुगतान करना हो।"},
	"language":               {"Language", "भाषा"},
	"change":                 {"Change", "बदलें"},
	"nav.search":             {"Search", "खोजें"},
	"nav.passengers":         {"Passengers", "यात्री"},
	"nav.bookings":           {"My bookings", "मेरी बुकिंग"},
	"nav.wallet":             {"Wallet", "वॉलेट"},
	"verify.title":           {"Verify your identity", "अपनी पहचान सत्यापित करें"},
	"verify.intro":           {"Tatkal tickets can be booked only by identity-verified accounts. We send a one-time code by SMS to your mobile number; one person's accounts share the Tatkal limits of that number.", "तत्काल टिकट केवल सत्यापित खाते ही बुक कर सकते हैं। हम आपके मोबाइल नंबर पर SMS से एक बार का कोड भेजते हैं; एक व्यक्ति के सभी खातों पर उस नंबर की तत्काल सीमाएँ साझा होती हैं।"},
	"verify.phone":           {"Mobile number (10 digits)", "मोबाइल नंबर (10 अंक)"},
	"verify.send":            {"Send me a code", "मुझे कोड भेजें"},
	"verify.code":            {"One-time code", "एक बार का कोड"},
	"verify.check":           {"Verify", "सत्यापित करें"},
	"verified":               {"Identity verified", "पहचान सत्यापित"},
	"device.bound":           {"This device is bound to your account", "यह डिवाइस आपके खाते से जुड़ा है"},
	"prepare.title":          {"Before 10:00", "10:00 से पहले"},
	"pax.title":              {"Saved passengers", "सहेजे गए यात्री"},
	"pax.intro":              {"Save up to 20 passengers now; at 10:00 you only tick who travels (at most 4).", "अभी 20 तक यात्री सहेजें; 10:00 बजे केवल यात्रा करने वालों को चुनें (अधिकतम 4)।"},
	"pax.none":               {"No saved passengers yet.", "अभी कोई यात्री सहेजा नहीं गया।"},
	"pax.add":                {"Add a passenger", "यात्री जोड़ें"},
	"pax.save":               {"Save passenger", "यात्री सहेजें"},
	"pax.remove":             {"Remove", "हटाएँ"},
	"name":                   {"Full name (as on the photo ID)", "पूरा नाम (फ़ोटो आईडी के अनुसार)"},
	"age":                    {"Age", "आयु"},
	"gender":                 {"Gender", "लिंग"},
	"male":                   {"Male", "पुरुष"},
	"female":                 {"Female", "महिला"},
	"transgender":            {"Transgender", "ट्रांसजेंडर"},
	"berth":                  {"Berth preference", "बर्थ वरीयता"},
	"nopref":                 {"No preference", "कोई वरीयता नहीं"},
	"idtype":                 {"Photo ID type", "फ़ोटो आईडी प्रकार"},
	"idref":                  {"Photo ID number", "फ़ोटो आईडी संख्या"},
	"noid":                   {"None", "कोई नहीं"},
	"validated":              {"ID checked", "आईडी जाँची गई"},
	"payref.title":           {"How you will pay", "आप कैसे भुगतान करेंगे"},
	"payref.save":            {"Save payment choice", "भुगतान विकल्प सहेजें"},
	"method":                 {"Payment method", "भुगतान का तरीका"},
	"wallet":                 {"Wallet", "वॉलेट"},
	"upi":                    {"UPI", "यूपीआई"},
	"card":                   {"Card", "कार्ड"},
	"nb":                     {"Net banking", "नेट बैंकिंग"},
	"vpa":                    {"UPI ID (like name@bank)", "यूपीआई आईडी (जैसे name@bank)"},
	"bank":                   {"Bank", "बैंक"},
	"search.title":           {"Search trains", "ट्रेन खोजें"},
	"from":                   {"From (station code)", "से (स्टेशन कोड)"},
	"to":                     {"To (station code)", "तक (स्टेशन कोड)"},
	"date":                   {"Journey date", "यात्रा की तारीख"},
	"search":                 {"Search", "खोजें"},
	"results":                {"Trains", "ट्रेनें"},
	"noresults":              {"No Tatkal trains between these stations on that date.", "इस तारीख को इन स्टेशनों के बीच कोई तत्काल ट्रेन नहीं।"},
	"departs":                {"Departs", "प्रस्थान"},
	"arrives":                {"Arrives", "आगमन"},
	"opens":                  {"Tatkal opens", "तत्काल खुलता है"},
	"fare.one":               {"Fare per passenger", "प्रति यात्री किराया"},
	"book":                   {"Book", "बुक करें"},
	"band.AVAILABLE":         {"Available", "उपलब्ध"},
	"band.FEW":               {"Few left", "कुछ ही बचे"},
	"band.WL":                {"Waitlist", "प्रतीक्षा सूची"},
	"band.SOLD_OUT":          {"Sold out", "बिक गया"},
	"window.title":           {"Tatkal window", "तत्काल विंडो"},
	"window.opensin":         {"Opens in", "खुलने में"},
	"window.servertime":      {"Times follow the server's clock; your device's clock is off by", "समय सर्वर की घड़ी के अनुसार है; आपके डिवाइस की घड़ी का अंतर"},
	"window.closed":          {"The Tatkal window for this train is closed.", "इस ट्रेन की तत्काल विंडो बंद है।"},
	"window.notyet":          {"The window is not open yet. Keep this page open: the form unlocks by itself at the opening time. Your saved passengers are ready below.", "विंडो अभी नहीं खुली है। यह पेज खुला रखें: खुलने के समय फ़ॉर्म अपने आप खुल जाएगा। आपके सहेजे यात्री नीचे तैयार हैं।"},
	"choose":                 {"Who travels? (at most 4)", "कौन यात्रा करेगा? (अधिकतम 4)"},
	"choose.help":            {"Tick 1 to 4 of your saved passengers.", "अपने सहेजे गए यात्रियों में से 1 से 4 चुनें।"},
	"choose.count":           {"Chosen:", "चुने गए:"},
	"hold":                   {"Hold seats", "सीटें रोकें"},
	"hold.title":             {"Your seats are held", "आपकी सीटें रोकी गई हैं"},
	"hold.left":              {"Time left to pay", "भुगतान के लिए शेष समय"},
	"hold.until":             {"Pay before", "इससे पहले भुगतान करें"},
	"farebreakup":            {"Fare breakup", "किराया विवरण"},
	"total":                  {"Total", "कुल"},
	"pay":                    {"Pay", "भुगतान करें"},
	"pay.cancel":             {"Release these seats", "ये सीटें छोड़ें"},
	"status":                 {"Status", "स्थिति"},
	"pnr":                    {"PNR", "पीएनआर"},
	"train":                  {"Train", "ट्रेन"},
	"journey":                {"Journey", "यात्रा"},
	"class":                  {"Class", "श्रेणी"},
	"passengers":             {"Passengers", "यात्री"},
	"coachberth":             {"Coach / berth", "कोच / बर्थ"},
	"eticket":                {"E-ticket", "ई-टिकट"},
	"eticket.open":           {"Open the e-ticket", "ई-टिकट खोलें"},
	"eticket.pdf":            {"Download PDF", "पीडीएफ़ डाउनलोड करें"},
	"rules.title":            {"Tatkal rules for this ticket", "इस टिकट पर लागू तत्काल नियम"},
	"rule.1":                 {"No refund on cancelling a confirmed Tatkal ticket; a full refund only by TDR (train over 3 hours late, diverted, coach not attached, downgrade).", "कन्फ़र्म तत्काल टिकट रद्द करने पर कोई धनवापसी नहीं; पूर्ण धनवापसी केवल टीडीआर से (ट्रेन 3 घंटे से अधिक लेट, मार्ग परिवर्तन, कोच न जुड़ना, डाउनग्रेड)।"},
	"rule.2":                 {"A waitlisted (TQWL) ticket is refunded less clerkage, and cancelled automatically with a refund if still waitlisted at charting.", "प्रतीक्षा सूची (TQWL) टिकट पर क्लर्केज घटाकर धनवापसी; चार्ट बनने तक प्रतीक्षा सूची में रहने पर अपने आप रद्द और धनवापसी।"},
	"rule.3":                 {"The passenger named with a photo ID must carry that ID when travelling. Names cannot be changed.", "फ़ोटो आईडी वाले यात्री को यात्रा में वह आईडी साथ रखनी होगी। नाम बदले नहीं जा सकते।"},
	"rule.4":                 {"No concessions on Tatkal: every passenger pays the full fare.", "तत्काल में कोई रियायत नहीं: हर यात्री पूरा किराया देता है।"},
	"history.title":          {"My bookings", "मेरी बुकिंग"},
	"history.none":           {"No bookings yet.", "अभी कोई बुकिंग नहीं।"},
	"details":                {"Details", "विवरण"},
	"cancel.title":           {"Cancel this ticket", "यह टिकट रद्द करें"},
	"cancel.refund":          {"Refund you will get", "आपको मिलने वाली धनवापसी"},
	"cancel.confirm":         {"Cancel the ticket", "टिकट रद्द करें"},
	"cancel.keep":            {"Keep the ticket", "टिकट रखें"},
	"wallet.title":           {"Wallet", "वॉलेट"},
	"wallet.balance":         {"Balance", "शेष राशि"},
	"wallet.ledger":          {"Ledger", "खाता"},
	"wallet.topup":           {"Add money", "पैसे जोड़ें"},
	"amount":                 {"Amount (₹)", "राशि (₹)"},
	"busy.title":             {"Very high demand right now", "अभी बहुत अधिक माँग है"},
	"busy.text":              {"Nothing was lost. Your seats, payments and place are safe. Please try again in a few seconds.", "कुछ भी नहीं खोया। आपकी सीटें, भुगतान और स्थान सुरक्षित हैं। कृपया कुछ सेकंड में फिर प्रयास करें।"},
	"chart.prepared":         {"Chart prepared at", "चार्ट तैयार हुआ:"},
	"chart.final":            {"Your berths are final.", "आपकी बर्थ अंतिम हैं।"},
	"chart.cancelled":        {"Your waitlisted ticket was not confirmed and is cancelled; the fare less clerkage is refunded automatically.", "आपका प्रतीक्षा सूची टिकट कन्फ़र्म नहीं हुआ और रद्द कर दिया गया है; क्लर्केज काटकर किराया अपने आप वापस किया जाएगा।"},
	"chart.done":             {"No more changes are possible.", "अब कोई बदलाव संभव नहीं है।"},
	"refresh":                {"This page refreshes by itself.", "यह पेज अपने आप रीफ़्रेश होता है।"},
	"refresh.now":            {"Refresh now", "अभी रीफ़्रेश करें"},
	"back.search":            {"Search again", "फिर से खोजें"},
	"pax.name":               {"Name", "नाम"},
	"window.open":            {"Open now, until", "अभी खुली है, तक"},
	"fare.basic":             {"Basic fare", "मूल किराया"},
	"fare.reservation":       {"Reservation charge", "आरक्षण शुल्क"},
	"fare.superfast":         {"Superfast charge", "सुपरफ़ास्ट शुल्क"},
	"fare.tatkal":            {"Tatkal charge", "तत्काल शुल्क"},
	"fare.gst":               {"GST", "जीएसटी"},
	"queue.title":            {"Waiting room", "प्रतीक्षा कक्ष"},
	"queue.explain":          {"This train books through a waiting room. Everyone who enters before the window opens (and up to 10 seconds after) gets a place drawn at random, so arriving first in that time does not matter; later arrivals queue behind in order.", "यह ट्रेन प्रतीक्षा कक्ष से बुक होती है। विंडो खुलने से पहले (और 10 सेकंड बाद तक) आने वाले हर व्यक्ति को यादृच्छिक स्थान मिलता है, इसलिए उस समय में पहले आना मायने नहीं रखता; बाद में आने वाले क्रम से पीछे लगते हैं।"},
	"queue.fairness":         {"How the draw is checked (the published commitment)", "ड्रॉ की जाँच कैसे होती है (प्रकाशित प्रतिबद्धता)"},
	"queue.enter":            {"Enter the waiting room", "प्रतीक्षा कक्ष में प्रवेश करें"},
	"queue.later":            {"The waiting room opens 15 minutes before the window. Keep this page open.", "प्रतीक्षा कक्ष विंडो से 15 मिनट पहले खुलता है। यह पेज खुला रखें।"},
	"queue.position":         {"Your place", "आपका स्थान"},
	"queue.wait":             {"Estimated wait", "अनुमानित प्रतीक्षा"},
	"queue.odds":             {"Your chances", "आपकी संभावना"},
	"queue.random":           {"Places are drawn at random among everyone who entered until", "इस समय तक आए सभी लोगों में स्थान यादृच्छिक रूप से तय होते हैं:"},
	"signin.challenge":       {"One more step", "एक और कदम"},
	"signin.puzzle":          {"Sign-in check", "साइन-इन जाँच"},
	"signin.puzzle.wait":     {"Your browser is solving a short puzzle that proves a person is signing in; the button unlocks when it is done.", "आपका ब्राउज़र एक छोटी पहेली हल कर रहा है जो दिखाती है कि कोई व्यक्ति साइन इन कर रहा है; पूरा होने पर बटन खुल जाएगा।"},
	"signin.puzzle.done":     {"Puzzle solved. Enter your password and sign in.", "पहेली हल हो गई। पासवर्ड डालें और साइन इन करें।"},
	"signin.puzzle.nojs":     {"JavaScript is off, so the puzzle cannot be solved here. Sign in again after", "जावास्क्रिप्ट बंद है, इसलिए पहेली यहाँ हल नहीं हो सकती। इतने समय बाद फिर साइन इन करें:"},
	"signin.puzzle.noworker": {"This browser cannot run the puzzle. Wait for the time shown above and sign in again.", "यह ब्राउज़र पहेली नहीं चला सकता। ऊपर दिखाए समय तक रुकें और फिर साइन इन करें।"},
	"gateway.back":           {"Back to your booking (its status)", "अपनी बुकिंग पर वापस (उसकी स्थिति)"},
	"pow.done":               {"Done. You can hold seats now.", "हो गया। अब आप सीटें रोक सकते हैं।"},
	"pow.label":              {"Booking check", "बुकिंग जाँच"},
	"pow.nojs":               {"Your browser solves a short check before you can hold seats. It needs JavaScript; without it, get a code by SMS instead (below).", "सीटें रोकने से पहले आपका ब्राउज़र एक छोटी जाँच हल करता है। इसके लिए जावास्क्रिप्ट चाहिए; उसके बिना नीचे SMS से कोड लें।"},
	"pow.checking":           {"Checking…", "जाँच हो रही है…"},
	"pow.failed":             {"The check could not start; reload the page, or get a code by SMS instead.", "जाँच शुरू नहीं हो सकी; पेज फिर से लोड करें, या SMS से कोड लें।"},
	"pow.noworker":           {"This browser cannot run the check. Get a code by SMS instead: the button below.", "यह ब्राउज़र जाँच नहीं चला सकता। इसके बजाय SMS से कोड लें: नीचे का बटन।"},
	"pow.otp.ask":            {"Cannot run the check? Send me a code by SMS and email instead", "जाँच नहीं चल रही? इसके बजाय SMS और ईमेल से कोड भेजें"},
	"pow.otp.code":           {"Booking check code (6 digits)", "बुकिंग जाँच कोड (6 अंक)"},
	"pow.otp.help":           {"We sent a code to your registered mobile number and email. Enter it, then hold seats. Each code works once.", "हमने आपके पंजीकृत मोबाइल नंबर और ईमेल पर कोड भेजा है। उसे डालें, फिर सीटें रोकें। हर कोड एक बार काम करता है।"},
	"pow.otp.sent":           {"A code was sent by SMS and email. It works for 5 minutes.", "SMS और ईमेल से कोड भेजा गया। यह 5 मिनट तक काम करता है।"},
	"error":                  {"Please check", "कृपया जाँचें"},
	"state.HELD":             {"Seats held: pay to book", "सीटें रोकी गईं: बुक करने के लिए भुगतान करें"},
	"state.PAYMENT_PENDING":  {"Waiting for your bank", "आपके बैंक की प्रतीक्षा"},
	"state.CONFIRMING":       {"Confirming your ticket", "आपका टिकट कन्फ़र्म हो रहा है"},
	"state.CONFIRMED":        {"Ticket confirmed", "टिकट कन्फ़र्म"},
	"state.WAITLISTED":       {"Waitlisted (TQWL)", "प्रतीक्षा सूची (TQWL)"},
	"state.FAILED":           {"Payment failed: nothing charged", "भुगतान विफल: कुछ नहीं कटा"},
	"state.REFUNDED":         {"Refunded", "धनवापसी हो गई"},
	"state.REFUND_INITIATED": {"Refund on its way", "धनवापसी प्रक्रिया में"},
	"state.EXPIRED":          {"Hold ran out", "होल्ड समाप्त"},
	"state.CANCELLED":        {"Cancelled", "रद्द"},
}
