package rehearse

// Profiles exposes the seeded travellers to the tests.
var Profiles = profiles
