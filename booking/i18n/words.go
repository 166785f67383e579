package i18n

import "strings"

// Amounts in words, as tickets and receipts print them, in the Indian
// system (crore, lakh, thousand, hundred).

var enOnes = strings.Fields("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen")

var enTens = strings.Fields("_ _ twenty thirty forty fifty sixty seventy eighty ninety")

// Hindi has a word of its own for every number below a hundred.
var hiUpTo99 = strings.Fields(`शून्य एक दो तीन चार पाँच छह सात आठ नौ दस ग्यारह बारह तेरह चौदह पंद्रह सोलह सत्रह अठारह उन्नीस
बीस इक्कीस बाईस तेईस चौबीस पच्चीस छब्बीस सत्ताईस अट्ठाईस उनतीस तीस इकतीस बत्तीस तैंतीस चौंतीस पैंतीस छत्तीस सैंतीस अड़तीस उनतालीस
चालीस इकतालीस बयालीस तैंतालीस चवालीस पैंतालीस छियालीस सैंतालीस अड़तालीस उनचास पचास इक्यावन बावन तिरपन चौवन पचपन छप्पन सत्तावन अट्ठावन उनसठ
साठ इकसठ बासठ तिरसठ चौंसठ पैंसठ छियासठ सड़सठ अड़सठ उनहत्तर सत्तर इकहत्तर बहत्तर तिहत्तर चौहत्तर पचहत्तर छिहत्तर सतहत्तर अठहत्तर उन्यासी
अस्सी इक्यासी बयासी तिरासी चौरासी पचासी छियासी सत्तासी अट्ठासी नवासी नब्बे इक्यानबे बानबे तिरानबे चौरानबे पंचानबे छियानबे सत्तानबे अट्ठानबे निन्यानबे`)

func below100(lang string, n int64) string {
	if lang == "hi" {
		return hiUpTo99[n]
	}
	if n < 20 {
		return enOnes[n]
	}
	if n%10 == 0 {
		return enTens[n/10]
	}
	return enTens[n/10] + "-" + enOnes[n%10]
}

// numberWords is n ≥ 0 in words.
func numberWords(lang string, n int64) string {
	if n == 0 {
		return below100(lang, 0)
	}
	scales := []struct {
		div    int64
		en, hi string
	}{{10000000, "crore", "करोड़"}, {100000, "lakh", "लाख"}, {1000, "thousand", "हज़ार"}, {100, "hundred", "सौ"}}
	var parts []string
	for _, sc := range scales {
		if n >= sc.div {
			q := n / sc.div
			n %= sc.div
			word := sc.en
			if lang == "hi" {
				word = sc.hi
			}
			parts = append(parts, numberWords(lang, q)+" "+word)
		}
	}
	if n > 0 {
		parts = append(parts, below100(lang, n))
	}
	return strings.Join(parts, " ")
}

// RupeesInWords is an amount in words: "Rupees three thousand fifty-two
// only" (Hindi: "तीन हज़ार बावन रुपये मात्र"), paise added when there are.
func RupeesInWords(lang string, paise int64) string {
	lang = Norm(lang)
	if paise < 0 {
		paise = -paise
	}
	r, p := paise/100, paise%100
	if lang == "hi" {
		s := numberWords(lang, r) + " रुपये"
		if p > 0 {
			s += " " + numberWords(lang, p) + " पैसे"
		}
		return s + " मात्र"
	}
	s := "Rupees " + numberWords(lang, r)
	if p > 0 {
		s += " and " + numberWords(lang, p) + " paise"
	}
	return s + " only"
}
