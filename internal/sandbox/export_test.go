package sandbox

// UnavailableError exposes unavailable to the tests.
var UnavailableError = unavailable

// ProcsWrites exposes procsWrites to the tests.
var ProcsWrites = &procsWrites

// MoveByPid exposes moveByPid to the benchmarks.
var MoveByPid = &moveByPid

// UseServer exposes useServer (rootless worlds' command servers) to the
// tests.
var UseServer = &useServer
