package sandbox

// UnavailableError exposes unavailable to the tests.
var UnavailableError = unavailable
