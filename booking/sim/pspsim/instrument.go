package pspsim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"tatkal/booking/payment/pspapi"
)

// A card's fingerprint and a net-banking account's reference are keyed
// hashes (the schema's own key, made once) of the card number or of the
// bank and login: the same card or account always gives the same value, at
// either gateway, and the value reveals nothing. The merchant never sees a
// card number; this is how it can still tell one card used by many
// accounts.

func (s *Server) instrumentRef(prefix, domain, v string) string {
	m := hmac.New(sha256.New, s.fpKey)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(v))
	return prefix + hex.EncodeToString(m.Sum(nil)[:16])
}

// cardFingerprint is the fingerprint of a card number (digits only).
func (s *Server) cardFingerprint(pan string) string { return s.instrumentRef("cfp_", "card", pan) }

// accountRef is the reference of a net-banking login at a bank.
func (s *Server) accountRef(bank, userID string) string {
	return s.instrumentRef("nba_", "netbanking", strings.ToUpper(strings.TrimSpace(bank))+"|"+strings.ToLower(strings.TrimSpace(userID)))
}

// payWith records the instrument the customer approved p with: the card
// number or net-banking login typed on the page, or, for the simulated
// customer who approves by itself, a card or login of its own (one per
// payment). UPI's instrument is its vpa, already known.
func (s *Server) payWith(p *payment, card, nbUser string) {
	switch p.Method {
	case pspapi.Card:
		if card == "" {
			card = "auto|" + p.Gateway + "|" + p.MerchantRef
		}
		p.Instrument = s.cardFingerprint(card)
	case pspapi.NetBanking:
		if strings.TrimSpace(nbUser) == "" {
			nbUser = "auto|" + p.Gateway + "|" + p.MerchantRef
		}
		p.Instrument = s.accountRef(p.Bank, nbUser)
	}
}

// cardNumber returns the digits of a card number typed on the page (spaces
// and dashes allowed) and whether it is one: 12 to 19 digits passing the
// Luhn check.
func cardNumber(s string) (string, bool) {
	d := strings.Map(func(c rune) rune {
		switch {
		case c >= '0' && c <= '9':
			return c
		case c == ' ' || c == '-':
			return -1
		}
		return 'x'
	}, s)
	if len(d) < 12 || len(d) > 19 || strings.ContainsRune(d, 'x') {
		return "", false
	}
	sum := 0
	for i := range len(d) {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return d, sum%10 == 0
}

// instrumentView puts p's instrument on the wire, in the field of its method.
func instrumentView(p *payment) (cardFingerprint, accountRef string) {
	switch p.Method {
	case pspapi.Card:
		return p.Instrument, ""
	case pspapi.NetBanking:
		return "", p.Instrument
	}
	return "", ""
}
