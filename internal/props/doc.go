// Package props holds bashvisor's property and state-machine tests, written
// with pgregory.net/rapid. They cross package boundaries: truncation
// (truncate), the environment policy (proc), the command analyser and
// display form (safety) and the engine as a whole (engine), against real
// processes.
//
// The package has no API; run it with `go test ./internal/props`. The number of
// cases follows rapid's flags (-rapid.checks, default 100, -rapid.steps);
// the engine state machine bounds its own iterations (see
// TestEngineStateMachine) so the package stays within a few tens of
// seconds under -race.
package props
