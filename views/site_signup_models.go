package views

// SignupPage opens an account: the number and e-mail address first, then,
// once a code is sent (Sent), the code and a password.
type SignupPage struct {
	Phone, Email string
	Sent         bool
	// Errors under their fields, by field name (phone, email, code,
	// password); the form's focus goes to the first.
	Errors map[string]string
}

// IdentityPage asks for the identity the verifier checks.
type IdentityPage struct {
	Verified bool
	Number   string // kept in the form after a refusal
	Name     string
	Year     string
	Next     string
	Errors   map[string]string
}

// ResetPage resets a password: the number first, then the code and the
// new password.
type ResetPage struct {
	Phone  string
	Sent   bool
	Errors map[string]string
}
