package sandbox

// UnavailableError exposes unavailable to the tests.
var UnavailableError = unavailable

// ProcsWrites exposes procsWrites to the tests.
var ProcsWrites = &procsWrites

// MoveByPid exposes moveByPid to the benchmarks.
var MoveByPid = &moveByPid
