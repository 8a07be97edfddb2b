package config

import "testing"

// The limits' defaults (internal: the defaults are stated at the knobs,
// not exported).
func TestLimitsDefaults(t *testing.T) {
	if d := (Limits{}).WithDefaults(); d.Memory != defaultMemoryLimit() || d.Processes != defaultProcesses || d.CPUTime != 0 {
		t.Fatalf("limit defaults %+v", d)
	}
}
