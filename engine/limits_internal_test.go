package engine

import (
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
)

// A call's override (ToolContext.Limits) replaces only the limits it
// sets; a negative one means no limit (zero for the layers below).
func TestCallLimits(t *testing.T) {
	e := &Engine{cfg: Config{Limits: config.Limits{Memory: 4 << 30, Processes: 4096}}}
	for _, c := range []struct {
		over *config.Limits
		want config.Limits
	}{
		{nil, config.Limits{Memory: 4 << 30, Processes: 4096}},
		{&config.Limits{CPUTime: 10 * time.Minute, Processes: 64}, config.Limits{Memory: 4 << 30, CPUTime: 10 * time.Minute, Processes: 64}},
		{&config.Limits{Memory: -1}, config.Limits{Processes: 4096}},
	} {
		if got := e.callLimits(ToolContext{Limits: c.over}); got != c.want {
			t.Errorf("override %+v: %+v, want %+v", c.over, got, c.want)
		}
	}
}
