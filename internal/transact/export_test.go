//go:build linux

package transact

// SetBeforeAcceptApply sets the hook Accept runs between its conflict
// check and the apply (nil: none).
func SetBeforeAcceptApply(f func()) { beforeAcceptApply = f }
