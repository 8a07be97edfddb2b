//go:build linux

package layer

// WidenAsUnprivileged makes the package widen permissions as an
// unprivileged engine does, for the test (see widenAsUnprivileged).
var WidenAsUnprivileged = widenAsUnprivileged
