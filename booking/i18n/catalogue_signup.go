package i18n

// The sign-up, identity and password reset pages and messages (kept in
// their own table, merged into the catalogue at start).
var signupCatalogue = map[string][2]string{
	"signup":                    {"Open an account", "खाता खोलें"},
	"signup.intro":              {"Open an account with your mobile number and e-mail address. We send a one-time code by SMS to prove the number; it becomes your user ID.", "अपने मोबाइल नंबर और ई-मेल पते से खाता खोलें। नंबर की पुष्टि के लिए हम SMS से एक बार का कोड भेजते हैं; यही आपकी यूज़र आईडी बनेगा।"},
	"signup.phone":              {"Mobile number (10 digits)", "मोबाइल नंबर (10 अंक)"},
	"signup.email":              {"E-mail address", "ई-मेल पता"},
	"signup.send":               {"Send me a code", "मुझे कोड भेजें"},
	"signup.code":               {"One-time code from the SMS", "SMS में आया एक बार का कोड"},
	"signup.password":           {"Choose a password (at least 12 characters)", "पासवर्ड चुनें (कम से कम 12 अक्षर)"},
	"signup.open":               {"Open my account", "मेरा खाता खोलें"},
	"signup.have":               {"Already have an account?", "पहले से खाता है?"},
	"signup.none":               {"New here?", "नए हैं?"},
	"signup.forgot":             {"Forgot your password?", "पासवर्ड भूल गए?"},
	"signup.code.sent":          {"If the number ending %[1]s can receive it, a code is on its way by SMS. It works for %[2]d minutes.", "यदि %[1]s पर समाप्त होने वाला नंबर इसे पा सकता है, तो SMS से कोड आ रहा है। यह %[2]d मिनट तक चलेगा।"},
	"signup.done":               {"Your account is open. One more step before Tatkal: verify your identity.", "आपका खाता खुल गया है। तत्काल से पहले एक और कदम: अपनी पहचान सत्यापित करें।"},
	"kyc.title":                 {"Verify your identity", "अपनी पहचान सत्यापित करें"},
	"kyc.intro":                 {"Tatkal tickets can be booked only by identity-verified accounts. Your Aadhaar number, name and year of birth are checked with the identity service; we keep only its reference, never the number.", "तत्काल टिकट केवल पहचान-सत्यापित खाते ही बुक कर सकते हैं। आपका आधार नंबर, नाम और जन्म वर्ष पहचान सेवा से जाँचे जाते हैं; हम केवल उसका संदर्भ रखते हैं, नंबर कभी नहीं।"},
	"kyc.number":                {"Aadhaar number (12 digits)", "आधार नंबर (12 अंक)"},
	"kyc.name":                  {"Name as on the Aadhaar card", "आधार कार्ड पर लिखा नाम"},
	"kyc.year":                  {"Year of birth", "जन्म वर्ष"},
	"kyc.consent":               {"I agree that these details are checked with the identity service to verify my account.", "मैं सहमत हूँ कि मेरे खाते के सत्यापन के लिए ये विवरण पहचान सेवा से जाँचे जाएँ।"},
	"kyc.check":                 {"Verify my identity", "मेरी पहचान सत्यापित करें"},
	"kyc.done":                  {"Your identity is verified. You can book Tatkal tickets.", "आपकी पहचान सत्यापित हो गई है। आप तत्काल टिकट बुक कर सकते हैं।"},
	"kyc.next":                  {"Add the passengers you travel with", "जिनके साथ यात्रा करते हैं उन यात्रियों को जोड़ें"},
	"reset.title":               {"Reset your password", "अपना पासवर्ड रीसेट करें"},
	"reset.intro":               {"We send a one-time code by SMS to the mobile number of your account.", "हम आपके खाते के मोबाइल नंबर पर SMS से एक बार का कोड भेजते हैं।"},
	"reset.password":            {"New password (at least 12 characters)", "नया पासवर्ड (कम से कम 12 अक्षर)"},
	"reset.save":                {"Set the new password", "नया पासवर्ड सेट करें"},
	"reset.done":                {"Your password is changed and every earlier session is signed out. Sign in with the new password.", "आपका पासवर्ड बदल गया है और पहले के सभी सत्र साइन आउट हो गए हैं। नए पासवर्ड से साइन इन करें।"},
	"msg.signup.otp.subject":    {"Your sign-up code", "आपका पंजीकरण कोड"},
	"msg.signup.otp.body":       {"Your Tatkal sign-up code is %[1]s. It expires in %[2]d minutes. Never share it: railway staff will never ask for it.", "आपका तत्काल पंजीकरण कोड %[1]s है। यह %[2]d मिनट में समाप्त होगा। इसे कभी साझा न करें: रेलवे कर्मचारी इसे कभी नहीं माँगेंगे।"},
	"msg.signup.exists.subject": {"Someone tried to open an account with your number", "किसी ने आपके नंबर से खाता खोलने का प्रयास किया"},
	"msg.signup.exists.body":    {"Someone asked to open a Tatkal account with this mobile number, which already has one. If it was you, sign in, or reset your password. If not, you need do nothing.", "किसी ने इस मोबाइल नंबर से तत्काल खाता खोलने को कहा, जिसका खाता पहले से है। यदि यह आप थे, तो साइन इन करें या अपना पासवर्ड रीसेट करें। यदि नहीं, तो कुछ करने की आवश्यकता नहीं है।"},
	"msg.reset.otp.subject":     {"Your password reset code", "आपका पासवर्ड रीसेट कोड"},
	"msg.reset.otp.body":        {"Your Tatkal password reset code is %[1]s. It expires in %[2]d minutes. If you did not ask for it, ignore this message; never share it.", "आपका तत्काल पासवर्ड रीसेट कोड %[1]s है। यह %[2]d मिनट में समाप्त होगा। यदि आपने इसे नहीं माँगा, तो इस संदेश को अनदेखा करें; इसे कभी साझा न करें।"},
	"msg.reset.done.subject":    {"Your password was changed", "आपका पासवर्ड बदल दिया गया"},
	"msg.reset.done.body":       {"The password of your Tatkal account was changed and every session signed out. If it was not you, reset it again at once.", "आपके तत्काल खाते का पासवर्ड बदल दिया गया और सभी सत्र साइन आउट कर दिए गए। यदि यह आपने नहीं किया, तो तुरंत इसे फिर से रीसेट करें।"},
	"msg.welcome.subject":       {"Welcome to Tatkal", "तत्काल में आपका स्वागत है"},
	"msg.welcome.body":          {"Your Tatkal account is open. Verify your identity before you book: only identity-verified accounts may book Tatkal tickets.", "आपका तत्काल खाता खुल गया है। बुक करने से पहले अपनी पहचान सत्यापित करें: केवल पहचान-सत्यापित खाते ही तत्काल टिकट बुक कर सकते हैं।"},
}

func init() {
	for k, v := range signupCatalogue {
		catalogue[k] = v
	}
}
